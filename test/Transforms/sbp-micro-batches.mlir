// RUN: sbpc-opt %s --split-input-file --sbp-micro-batches=count=2 --verify-diagnostics | FileCheck %s
// RUN: not sbpc-opt %s --split-input-file --sbp-micro-batches=count=3 2>&1 | FileCheck %s --check-prefix=THREE

// Two micro-batches: micro-batch i is rows i, i+2 of x; each runs whole
// (forward and the gradient) before the next; the loss and the gradient
// (P(sum) over the batch) are added, each right after the op that makes
// micro-batch 1's (so that terms do not pile up to the end of the
// micro-batch), the rows of y (S(0)) put back in order
// by ops marked sbp.output_join (test/Transforms/sbp-spmdize-output-join.mlir).
// Each op made for micro-batch i says so (sbp.micro_batch = i): the search
// ties micro-batch 1's to micro-batch 0's, the report folds them.
// CHECK-LABEL: func.func @f
// CHECK: %[[G0:.*]] = graph.reshape %arg0 {sbp.micro_batch = 0 : i64} : (tensor<4x2xf32>) -> tensor<2x2x2xf32>
// CHECK-NEXT: %[[S0:.*]] = graph.slice %[[G0]] starts [0, 0, 0] limits [2, 1, 2] {sbp.micro_batch = 0 : i64}
// CHECK-NEXT: %[[X0:.*]] = graph.reshape %[[S0]] {sbp.micro_batch = 0 : i64} : (tensor<2x1x2xf32>) -> tensor<2x2xf32>
// CHECK-NEXT: %[[Y0:.*]] = graph.matmul %[[X0]], %arg1 {sbp.micro_batch = 0 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[L0:.*]] = graph.reduce_sum %[[Y0]] {{.*}}{sbp.micro_batch = 0 : i64}
// CHECK-NEXT: %[[D0:.*]] = graph.matmul %[[X0]], %[[Y0]] transpose_lhs {sbp.micro_batch = 0 : i64}
// CHECK-NEXT: %[[G1:.*]] = graph.reshape %arg0 {sbp.micro_batch = 1 : i64}
// CHECK-NEXT: %[[S1:.*]] = graph.slice %[[G1]] starts [0, 1, 0] limits [2, 2, 2] {sbp.micro_batch = 1 : i64}
// CHECK-NEXT: %[[X1:.*]] = graph.reshape %[[S1]] {sbp.micro_batch = 1 : i64}
// CHECK-NEXT: %[[Y1:.*]] = graph.matmul %[[X1]], %arg1 {sbp.micro_batch = 1 : i64}
// CHECK-NEXT: %[[L1:.*]] = graph.reduce_sum %[[Y1]] {{.*}}{sbp.micro_batch = 1 : i64}
// CHECK-NEXT: %[[L:.*]] = graph.add %[[L0]], %[[L1]] {graph.accumulate, sbp.micro_batch = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[D1:.*]] = graph.matmul %[[X1]], %[[Y1]] transpose_lhs {sbp.micro_batch = 1 : i64}
// CHECK-NEXT: %[[D:.*]] = graph.add %[[D0]], %[[D1]] {graph.accumulate, sbp.micro_batch = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R0:.*]] = graph.reshape %[[Y0]] {sbp.micro_batch = 0 : i64, sbp.output_join} : (tensor<2x3xf32>) -> tensor<2x1x3xf32>
// CHECK-NEXT: %[[R1:.*]] = graph.reshape %[[Y1]] {sbp.micro_batch = 1 : i64, sbp.output_join} : (tensor<2x3xf32>) -> tensor<2x1x3xf32>
// CHECK-NEXT: %[[C:.*]] = graph.concat %[[R0]], %[[R1]] axis = 1 {sbp.output_join} : (tensor<2x1x3xf32>, tensor<2x1x3xf32>) -> tensor<2x2x3xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.reshape %[[C]] {sbp.output_join} : (tensor<2x2x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: return %[[Y]], %[[L]], %[[D]]
// THREE: input 'x' [4, 2] cannot be split into 3 micro-batches: its batch (dimension 0) is not divisible by 3
func.func @f(%x: tensor<4x2xf32> {graph.input = "x"}, %w: tensor<2x3xf32> {graph.param = "w"})
    -> (tensor<4x3xf32> {graph.output = "y"}, tensor<f32> {graph.output = "loss"},
        tensor<2x3xf32> {graph.output = "grad.w"}) {
  %y = graph.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %l = graph.reduce_sum %y dims [0, 1] : (tensor<4x3xf32>) -> tensor<f32>
  %g = graph.matmul %x, %y transpose_lhs : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %y, %l, %g : tensor<4x3xf32>, tensor<f32>, tensor<2x3xf32>
}

// -----

// A softmax across the batch needs every row at once.
func.func @across(%x: tensor<4x2xf32> {graph.input = "x"}) -> (tensor<4x2xf32> {graph.output = "y"}) {
  // expected-error @+1 {{'graph.softmax' op needs operand 0 as [S(1)] over the batch but it is [S(0)]: the batch cannot be split into micro-batches here}}
  %y = graph.softmax %x axis = 0 : tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A result transposed so that the batch is not its first dimension cannot
// be put back together.
func.func @transposed(%x: tensor<4x2xf32> {graph.input = "x"}) -> (tensor<2x4xf32> {graph.output = "t"}) {
  // expected-error @-1 {{'func.func' op result 't' is [S(1)] over the batch; only sums (P(sum)), rows of the batch (S(0)) and copies (B) can be assembled from micro-batches}}
  %t = graph.transpose %x perm [1, 0] : (tensor<4x2xf32>) -> tensor<2x4xf32>
  return %t : tensor<2x4xf32>
}

// -----

// A step already pinned to a mesh's layout is unrolled too late.
sbp.mesh @m axes ["dp"] shape [2]
func.func @pinned(%x: tensor<4x2xf32> {graph.input = "x"}) -> (tensor<4x2xf32> {graph.output = "y"}) {
  // expected-error @+1 {{'sbp.constraint' op pins a layout before --sbp-micro-batches: unroll the micro-batches first, then lay the step out}}
  %0 = sbp.constraint %x mesh @m [S(0)] : tensor<4x2xf32>
  %y = graph.relu %0 : tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
