// RUN: not sbpc-opt %s --sbp-propagate=cluster=no-such-cluster 2>&1 | FileCheck %s
// CHECK: error: no-such-cluster: cannot open (and it is not a preset: cpu, dgx-h100x8, dgx-h100-cluster)
sbp.mesh @m axes ["x"] shape [2]
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
