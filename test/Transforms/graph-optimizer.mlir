// RUN: sbpc-opt %s --split-input-file --graph-autodiff --graph-optimizer="optimizer=adamw lr=0.5" --verify-diagnostics | FileCheck %s --check-prefix=ADAMW
// RUN: sbpc-opt %s --split-input-file --graph-autodiff --graph-optimizer="optimizer=sgd lr=0.5 momentum=0.9" --verify-diagnostics | FileCheck %s --check-prefix=SGD

// One training step: the gradients become updates; the optimizer state is
// added as parameters, typed and stored like its parameter; every new value
// is an output named like the parameter it replaces, typed as it and
// written in its stored shape (no reshape).
// ADAMW-LABEL: func.func @step
// ADAMW-SAME: %[[W:[a-z0-9]+]]: tensor<2x3xf32> {graph.param = "w", graph.param_shape = array<i64: 6>}
// ADAMW-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {graph.param = "optimizer.step"}
// ADAMW-SAME: %[[M:[a-z0-9]+]]: tensor<2x3xf32> {graph.param = "optimizer.m.w", graph.param_shape = array<i64: 6>}
// ADAMW-SAME: %[[V:[a-z0-9]+]]: tensor<2x3xf32> {graph.param = "optimizer.v.w", graph.param_shape = array<i64: 6>}
// ADAMW-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<f32> {graph.output = "optimizer.step"}, tensor<2x3xf32> {graph.output = "w", graph.param_shape = array<i64: 6>}, tensor<2x3xf32> {graph.output = "optimizer.m.w", graph.param_shape = array<i64: 6>}, tensor<2x3xf32> {graph.output = "optimizer.v.w", graph.param_shape = array<i64: 6>})
// ADAMW: graph.add %[[STEP]], %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// ADAMW-NOT: graph.reshape
// ADAMW: graph.adamw_update %[[W]], %{{.*}}, %[[M]], %[[V]], %[[STEP]] lr = 5.000000e-01 beta1 = 9.000000e-01
// ADAMW-NOT: graph.reshape
// SGD-LABEL: func.func @step
// SGD-SAME: tensor<2x3xf32> {graph.param = "optimizer.velocity.w", graph.param_shape = array<i64: 6>}
// SGD-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<2x3xf32> {graph.output = "w", graph.param_shape = array<i64: 6>}, tensor<2x3xf32> {graph.output = "optimizer.velocity.w", graph.param_shape = array<i64: 6>})
// SGD: graph.sgd_update {{.*}} lr = 5.000000e-01 momentum = 9.000000e-01 weight_decay = 0.000000e+00
func.func @step(%w: tensor<2x3xf32> {graph.param = "w", graph.param_shape = array<i64: 6>},
                %x: tensor<2x3xf32> {graph.input = "x"}) -> (tensor<f32> {graph.output = "loss"}) {
  %p = graph.mul %w, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %p dims [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An argument of the user's named like an optimizer state would be taken
// for one.
// expected-error @+1 {{'func.func' op already has an argument named 'optimizer.step': 'optimizer.' names are the states this pass adds (an optimizer added twice, or rename the argument)}}
func.func @state_name(%w: tensor<f32> {graph.param = "w"}, %s: tensor<f32> {graph.input = "optimizer.step"}) -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.mul %w, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
