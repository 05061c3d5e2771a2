// RUN: sbpc-opt %s --split-input-file --graph-autodiff --verify-diagnostics | FileCheck %s

// A linear layer with a loss: the gradient of every parameter is appended
// as `grad.<name>`, in argument order; the input gets none; a parameter used
// twice (b) gets the sum of both gradients.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<3x2xf32> {graph.output = "grad.w"}, tensor<2xf32> {graph.output = "grad.b"})
// CHECK: %[[ONE:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G:.*]] = graph.broadcast %{{.*}} {graph.backward} : (tensor<1x1xf32>) -> tensor<4x2xf32>
// CHECK: %[[SUM:.*]] = graph.reduce_sum %[[G]] dims [0] keepdims {graph.backward} : (tensor<4x2xf32>) -> tensor<1x2xf32>
// CHECK: %[[DB2:.*]] = graph.reshape %[[SUM]] {graph.backward} : (tensor<1x2xf32>) -> tensor<2xf32>
// CHECK: %[[DB:.*]] = graph.add %{{.*}}, %[[DB2]] {graph.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK: %[[DW:.*]] = graph.matmul %arg0, %[[G]] transpose_lhs {graph.backward} : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
// CHECK: return %{{.*}}, %[[DW]], %[[DB]]
func.func @linear(%x: tensor<4x3xf32> {graph.input = "x"},
                  %w: tensor<3x2xf32> {graph.param = "w"},
                  %b: tensor<2xf32> {graph.param = "b"}) -> (tensor<f32> {graph.output = "loss"}) {
  %y = graph.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %z = graph.add %y, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %s = graph.reduce_sum %z dims [0, 1] : (tensor<4x2xf32>) -> tensor<f32>
  %t = graph.reduce_sum %b dims [0] : (tensor<2xf32>) -> tensor<f32>
  %l = graph.add %s, %t : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A weight shared by a batch: its gradient is one GEMM over every row of
// the batch (the activations and their gradient seen as [rows, features]),
// not a batched product summed over the batch afterwards; with the weight
// used transposed, the product comes out transposed too.
// CHECK-LABEL: func.func @batched
// CHECK: %[[G:.*]] = graph.broadcast %{{.*}} -> tensor<2x4x2xf32>
// CHECK-DAG: %[[X2:.*]] = graph.reshape %arg0 {graph.backward} : (tensor<2x4x3xf32>) -> tensor<8x3xf32>
// CHECK-DAG: %[[G2:.*]] = graph.reshape %[[G]] {graph.backward} : (tensor<2x4x2xf32>) -> tensor<8x2xf32>
// CHECK: %[[DV:.*]] = graph.matmul %[[G2]], %[[X2]] transpose_lhs {graph.backward} : (tensor<8x2xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
// CHECK-DAG: %[[X3:.*]] = graph.reshape %arg0 {graph.backward} : (tensor<2x4x3xf32>) -> tensor<8x3xf32>
// CHECK-DAG: %[[G3:.*]] = graph.reshape %[[G]] {graph.backward} : (tensor<2x4x2xf32>) -> tensor<8x2xf32>
// CHECK: %[[DW:.*]] = graph.matmul %[[X3]], %[[G3]] transpose_lhs {graph.backward} : (tensor<8x3xf32>, tensor<8x2xf32>) -> tensor<3x2xf32>
// CHECK-NOT: graph.reduce_sum {{.*}} dims [0] {graph.backward} :
// CHECK: return %{{.*}}, %[[DW]], %[[DV]]
func.func @batched(%x: tensor<2x4x3xf32> {graph.input = "x"},
                   %w: tensor<3x2xf32> {graph.param = "w"},
                   %v: tensor<2x3xf32> {graph.param = "v"}) -> (tensor<f32> {graph.output = "loss"}) {
  %y = graph.matmul %x, %w : (tensor<2x4x3xf32>, tensor<3x2xf32>) -> tensor<2x4x2xf32>
  %z = graph.matmul %x, %v transpose_rhs : (tensor<2x4x3xf32>, tensor<2x3xf32>) -> tensor<2x4x2xf32>
  %s = graph.add %y, %z : (tensor<2x4x2xf32>, tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  %l = graph.reduce_sum %s dims [0, 1, 2] : (tensor<2x4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter the loss does not depend on gets zeros; a stored shape
// goes on the gradient's result, which keeps the parameter's type.
// CHECK-LABEL: func.func @unused
// CHECK-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<2xf32> {graph.output = "grad.a"}, tensor<2x2xf32> {graph.output = "grad.u", graph.param_shape = array<i64: 4>})
// CHECK: %[[Z:.*]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<2x2xf32>
// CHECK-NOT: graph.reshape
// CHECK: return %{{.*}}, %{{.*}}, %[[Z]] : tensor<f32>, tensor<2xf32>, tensor<2x2xf32>
func.func @unused(%a: tensor<2xf32> {graph.param = "a"},
                  %u: tensor<2x2xf32> {graph.param = "u", graph.param_shape = array<i64: 4>})
    -> (tensor<f32> {graph.output = "loss"}) {
  %l = graph.reduce_sum %a dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op has no result named 'loss' (graph.output) to differentiate}}
func.func @noloss(%a: tensor<2xf32> {graph.param = "a"}) -> (tensor<2xf32> {graph.output = "y"}) {
  return %a : tensor<2xf32>
}

// -----

// An output of the user's named like a gradient would be taken for one.
// expected-error @+1 {{'func.func' op already has an output named 'grad.a': 'grad.' names are the gradients this pass adds (differentiated twice, or rename the output)}}
func.func @grad_name(%a: tensor<f32> {graph.param = "a"}) -> (tensor<f32> {graph.output = "loss"}, tensor<f32> {graph.output = "grad.a"}) {
  return %a, %a : tensor<f32>, tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op result 'loss' is 'tensor<2xf32>'; the loss must be a scalar tensor<f32>}}
func.func @vector(%a: tensor<2xf32> {graph.param = "a"}) -> (tensor<2xf32> {graph.output = "loss"}) {
  return %a : tensor<2xf32>
}

// -----

func.func @max(%a: tensor<2x3xf32> {graph.param = "a"}) -> (tensor<f32> {graph.output = "loss"}) {
  // expected-error @+1 {{'graph.reduce_max' op has no gradient rule yet}}
  %m = graph.reduce_max %a dims [1] : (tensor<2x3xf32>) -> tensor<2xf32>
  %l = graph.reduce_sum %m dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
