// RUN: sbpc-opt %s --sbp-micro-batches=count=2 --sbp-layout --sbp-spmdize | FileCheck %s

// A micro-batched output (y, rows split over dp) is not joined: each
// micro-batch's rows are stored as soon as they are computed, as rows
// [i, 2] of the rank's shard, and the join's reshapes and concat go. The
// summed loss is stored once, after the last micro-batch's part is added.
// CHECK-LABEL: func.func @f()
// CHECK: %[[Y0:.*]] = graph.matmul {{.*}} -> tensor<1x3xf32>
// CHECK-NEXT: exec.store %[[Y0]] "y" global [4, 3] [S(0)] rows [0, 2] : tensor<1x3xf32>
// CHECK: %[[Y1:.*]] = graph.matmul {{.*}} -> tensor<1x3xf32>
// CHECK-NEXT: exec.store %[[Y1]] "y" global [4, 3] [S(0)] rows [1, 2] : tensor<1x3xf32>
// CHECK-NOT: graph.concat
// CHECK: exec.store {{.*}} "loss" global [] [P(sum)] : tensor<f32>
// CHECK-NOT: graph.concat
// CHECK: return
sbp.mesh @m axes ["dp"] shape [2]
func.func @f(%x: tensor<4x2xf32> {graph.input = "x", sbp.layout = #sbp.nd<[S(0)]>},
             %w: tensor<2x3xf32> {graph.param = "w", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4x3xf32> {graph.output = "y"}, tensor<f32> {graph.output = "loss"}) {
  %y = graph.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %l = graph.reduce_sum %y dims [0, 1] : (tensor<4x3xf32>) -> tensor<f32>
  return %y, %l : tensor<4x3xf32>, tensor<f32>
}
