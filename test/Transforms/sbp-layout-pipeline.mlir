// RUN: sbpc-opt %s --sbp-layout=cluster=dgx-h100x8 | FileCheck %s
// Tests that the pipeline sbpc compile runs is available to sbpc-opt.
// CHECK: sbp.boxing %{{.+}} mesh @m from [P(sum)] to [B] {{.*}}collective = "all-reduce"
sbp.mesh @m axes ["tp"] shape [2]
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %xs = sbp.constraint %x mesh @m [S(1)] : tensor<4x8xf32>
  %ws = sbp.constraint %w mesh @m [S(0)] : tensor<8x4xf32>
  %y = graph.matmul %xs, %ws : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %yb = sbp.constraint %y mesh @m [B] : tensor<4x4xf32>
  return %yb : tensor<4x4xf32>
}
