// RUN: sbpc-opt %s --split-input-file --sbp-propagate --sbp-insert-boxing | FileCheck %s

// Under bf16 (the module's sbp.precision, which sbpc compile --precision
// bf16 sets), a boxing moves 2-byte elements wherever --exec-bf16 will hold
// what it moves in bf16: an activation, and a parameter on its way to the
// forward. The optimizer update reads the parameter in f32: its boxing of
// the same change is another one, of 4-byte elements. An f32 module boxes
// the same activation at 4 bytes.
// CHECK-LABEL: func.func @step
// CHECK: %[[WF:.+]] = sbp.boxing %arg1 mesh @m from [S(0)] to [B] {bytes_per_rank = 64 : i64, {{.*}}, sbp.bf16}
// CHECK: %[[X:.+]] = sbp.boxing %arg0 mesh @m from [S(0)] to [B] {bytes_per_rank = 32 : i64, {{.*}}, sbp.bf16}
// CHECK: graph.matmul %[[X]], %[[WF]]
// CHECK: %[[WU:.+]] = sbp.boxing %arg1 mesh @m from [S(0)] to [B] {bytes_per_rank = 128 : i64, {{[^}]*}}"}
// CHECK: graph.sgd_update %[[WU]]
module attributes {sbp.precision = "bf16"} {
sbp.mesh @m axes ["x"] shape [2]
func.func @step(%x: tensor<4x8xf32> {graph.input = "x", sbp.layout = #sbp.nd<[S(0)]>},
                %w: tensor<8x8xf32> {graph.param = "w", sbp.layout = #sbp.nd<[S(0)]>},
                %g: tensor<8x8xf32> {graph.input = "g", sbp.layout = #sbp.nd<[B]>},
                %v: tensor<8x8xf32> {graph.param = "v", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %wf = sbp.constraint %w mesh @m [B] : tensor<8x8xf32>
  %xb = sbp.constraint %x mesh @m [B] : tensor<4x8xf32>
  %y = graph.matmul %xb, %wf : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw = graph.relu %g : tensor<8x8xf32>
  %wu = sbp.constraint %w mesh @m [B] : tensor<8x8xf32>
  %w1, %v1 = graph.sgd_update %wu, %dw, %v lr = 1.0e-01 momentum = 9.0e-01 weight_decay = 0.0 : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
  return %y, %w1, %v1 : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
}

// -----

// CHECK-LABEL: func.func @f32
// CHECK: sbp.boxing %arg0 mesh @m from [S(0)] to [B] {bytes_per_rank = 64 : i64
// CHECK-NOT: sbp.bf16
sbp.mesh @m axes ["x"] shape [2]
func.func @f32(%x: tensor<4x8xf32> {graph.input = "x", sbp.layout = #sbp.nd<[S(0)]>}) -> tensor<4x8xf32> {
  %xb = sbp.constraint %x mesh @m [B] : tensor<4x8xf32>
  %y = graph.relu %xb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
