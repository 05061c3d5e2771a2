// RUN: sbpc-opt %s --graph-autodiff=recompute=none | FileCheck %s --check-prefix=NONE
// RUN: sbpc-opt %s --graph-autodiff=recompute=full | FileCheck %s --check-prefix=FULL
// RUN: sbpc-opt %s --graph-autodiff=recompute=selective | FileCheck %s --check-prefix=SEL
// RUN: not sbpc-opt %s --graph-autodiff=recompute=some 2>&1 | FileCheck %s --check-prefix=BAD

// Two blocks. Without recomputation the backward pass uses the forward
// values %0 and %2 (and %3), which stay live through it.
// NONE: %[[H:.*]] = graph.matmul %arg0, %arg1 {graph.region = "b0"}
// NONE: %[[Y:.*]] = graph.matmul %{{.*}}, %arg1 {graph.region = "b1"}
// NONE: graph.relu_grad
// NONE: graph.mul %{{.*}}, %[[Y]]
// NONE: graph.relu_grad %[[H]]
// NONE-NOT: graph.region

// Full: each block's forward ops that the backward pass needs are cloned
// right before that block's backward; the block outputs other forward ops
// use (%1, %4) are kept, not recomputed.
// FULL: %[[A:.*]] = graph.relu %{{.*}} {graph.region = "b0"}
// FULL: graph.reduce_sum
// FULL: graph.broadcast
// FULL-NEXT: %[[Y:.*]] = graph.matmul %[[A]], %arg1 {graph.backward, graph.region = "b1"}
// FULL-NEXT: %[[Z:.*]] = graph.mul %[[Y]], %[[Y]] {graph.backward, graph.region = "b1", graph.selective}
// FULL-NEXT: graph.relu_grad %[[Z]]
// FULL-NEXT: graph.mul %{{.*}}, %[[Y]]
// FULL: %[[H:.*]] = graph.matmul %arg0, %arg1 {graph.backward, graph.region = "b0"}
// FULL-NEXT: graph.relu_grad %[[H]]

// Selective: only ops marked graph.selective, here the square and its
// relu: the square is recomputed for relu's gradient; matmul results are
// kept.
// SEL: %[[Y:.*]] = graph.matmul %{{.*}}, %arg1 {graph.region = "b1"}
// SEL: graph.broadcast
// SEL-NEXT: %[[Z:.*]] = graph.mul %[[Y]], %[[Y]] {graph.backward, graph.region = "b1", graph.selective}
// SEL-NEXT: graph.relu_grad %[[Z]]
// SEL-NEXT: graph.mul %{{.*}}, %[[Y]]
// SEL-NOT: graph.region

// BAD: recompute must be none, full or selective, got 'some'
func.func @f(%x: tensor<2x4xf32> {graph.input = "x"}, %w: tensor<4x4xf32> {graph.param = "w"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %h = graph.matmul %x, %w {graph.region = "b0"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a = graph.relu %h {graph.region = "b0"} : tensor<2x4xf32>
  %y = graph.matmul %a, %w {graph.region = "b1"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z = graph.mul %y, %y {graph.region = "b1", graph.selective} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = graph.relu %z {graph.region = "b1", graph.selective} : tensor<2x4xf32>
  %l = graph.reduce_sum %t dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
