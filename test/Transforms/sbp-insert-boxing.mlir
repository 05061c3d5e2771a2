// RUN: sbpc-opt %s --split-input-file --sbp-propagate --sbp-insert-boxing | FileCheck %s

// Tests that a plan of several hops becomes one boxing per hop, each with
// its own collective and axis: swapping which axis splits which dimension
// on a 2x2 mesh.
// CHECK-LABEL: func.func @swap
// CHECK: %[[A:.+]] = sbp.boxing %arg0 mesh @m from [S(0), S(1)] to {{.*}}mesh_axes = ["{{a|b}}"]
// CHECK: %[[B:.+]] = sbp.boxing %[[A]] mesh @m from {{.*}}mesh_axes = ["{{a|b}}"]
// CHECK: sbp.boxing %[[B]] mesh @m from {{.*}} to [S(1), S(0)] {{.*}}mesh_axes = ["{{a|b}}"]
// CHECK-SAME: reason = "sbp.constraint at {{.+}} pins [S(1), S(0)]"
sbp.mesh @m axes ["a", "b"] shape [2, 2]
func.func @swap(%x: tensor<4x4xf32> {sbp.layout = #sbp.nd<[S(0), S(1)]>}) -> tensor<4x4xf32> {
  %0 = sbp.constraint %x mesh @m [S(1), S(0)] : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that the same change of the same value is made once, for
// constraints too, and that a constraint the value already meets vanishes.
// CHECK-LABEL: func.func @shared_constraint
// CHECK-COUNT-1: sbp.boxing
// CHECK-NOT: sbp.boxing
// CHECK-NOT: sbp.constraint %
sbp.mesh @m axes ["x"] shape [2]
func.func @shared_constraint(%x: tensor<4x4xf32> {sbp.layout = #sbp.nd<[S(0)]>}) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = sbp.constraint %x mesh @m [B] : tensor<4x4xf32>
  %1 = sbp.constraint %x mesh @m [B] : tensor<4x4xf32>
  %2 = sbp.constraint %x mesh @m [S(0)] : tensor<4x4xf32>
  return %0, %1, %2 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
