// RUN: sbpc-opt %s --sbp-layout --sbp-pipeline=stages=3 | FileCheck %s

// Three blocks of times about 1, 1 and 10 on three stages: one each (a cut
// by midpoints would leave the middle stage empty).
// CHECK-LABEL: func.func @j
// CHECK: graph.matmul {{.*}}sbp.stage = 0
// CHECK: graph.matmul {{.*}}sbp.stage = 1
// CHECK: graph.matmul {{.*}}sbp.stage = 2
sbp.mesh @m axes ["dp"] shape [1]
func.func @j(%x: tensor<4x4xf32> {graph.input = "x", sbp.layout = #sbp.nd<[B]>},
             %w: tensor<4x4xf32> {graph.param = "w", sbp.layout = #sbp.nd<[B]>},
             %v: tensor<4x40xf32> {graph.param = "v", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4x40xf32> {graph.output = "y"}) {
  %0 = graph.matmul %x, %w {graph.region = "a"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = graph.matmul %0, %w {graph.region = "b"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = graph.matmul %1, %v {graph.region = "c"} : (tensor<4x4xf32>, tensor<4x40xf32>) -> tensor<4x40xf32>
  return %2 : tensor<4x40xf32>
}
