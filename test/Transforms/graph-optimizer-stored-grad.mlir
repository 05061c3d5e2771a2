// RUN: sbpc-opt %s --graph-optimizer="optimizer=sgd lr=0.5" | FileCheck %s

// A gradient given in the parameter's stored shape (as --graph-autodiff
// wrote it before it kept the parameter's type): the update reshapes it to
// the parameter's type once; its results keep that type, stored as the
// parameter is.
// CHECK-LABEL: func.func @step
// CHECK-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<2x3xf32> {graph.output = "w", graph.param_shape = array<i64: 6>}, tensor<2x3xf32> {graph.output = "optimizer.velocity.w", graph.param_shape = array<i64: 6>})
// CHECK: %[[G:.*]] = graph.reshape %{{.*}} : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK: graph.sgd_update %{{.*}}, %[[G]], %{{.*}} lr = 5.000000e-01
// CHECK-NOT: graph.reshape
func.func @step(%w: tensor<2x3xf32> {graph.param = "w", graph.param_shape = array<i64: 6>},
                %g: tensor<6xf32> {graph.input = "g"})
    -> (tensor<f32> {graph.output = "loss"}, tensor<6xf32> {graph.output = "grad.w"}) {
  %l = graph.reduce_sum %w dims [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %l, %g : tensor<f32>, tensor<6xf32>
}
