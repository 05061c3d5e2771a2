// RUN: sbpc-opt %s --exec-fuse --split-input-file | FileCheck %s

// A training step's MLP: the sum before the GELU, which gelu_grad reads,
// becomes the linear layer's second result (cuBLASLt's GELU_AUX_BIAS); the
// gradient through the GELU is one exec.matmul_gelu_grad with the first
// layer's bias gradient (DGELU_BGRAD); the second layer's bias gradient
// joins its weight gradient (BGRADA), at the reduce, the reshape of the
// gradient it needs copied there.
sbp.mesh @m axes ["x"] shape [1]
func.func @mlp() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %dy = exec.load "input" "dy" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %w1 = exec.load "param" "w1" global [8, 16] [B] : tensor<8x16xf32>
  %b1 = exec.load "param" "b1" global [16] [B] : tensor<16xf32>
  %w2 = exec.load "param" "w2" global [16, 8] [B] : tensor<16x8xf32>
  %0 = graph.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %1 = graph.add %0, %b1 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %2 = graph.gelu %1 : tensor<2x4x16xf32>
  %h = graph.reshape %2 : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %db2 = graph.reduce_sum %dy dims [0, 1] keepdims : (tensor<2x4x8xf32>) -> tensor<1x1x8xf32>
  exec.store %db2 "db2" global [1, 1, 8] [B] : tensor<1x1x8xf32>
  %3 = graph.matmul %dy, %w2 transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %dy2 = graph.reshape %dy : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dw2 = graph.matmul %h, %dy2 transpose_lhs : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  exec.store %dw2 "dw2" global [16, 8] [B] : tensor<16x8xf32>
  %4 = graph.gelu_grad %1, %3 : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %db1 = graph.reduce_sum %4 dims [0, 1] : (tensor<2x4x16xf32>) -> tensor<16xf32>
  exec.store %db1 "db1" global [16] [B] : tensor<16xf32>
  %x2 = graph.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %d2 = graph.reshape %4 : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %dw1 = graph.matmul %x2, %d2 transpose_lhs : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  exec.store %dw1 "dw1" global [8, 16] [B] : tensor<8x16xf32>
  return
}

// CHECK-LABEL: func.func @mlp()
// CHECK: %[[X:.*]] = exec.load "input" "x"
// CHECK: %[[DY:.*]] = exec.load "input" "dy"
// CHECK: %[[W1:.*]] = exec.load "param" "w1"
// CHECK: %[[B1:.*]] = exec.load "param" "b1"
// CHECK: %[[W2:.*]] = exec.load "param" "w2"
// CHECK-NEXT: %[[A:.*]], %[[PRE:.*]] = exec.linear %[[X]], %[[W1]], %[[B1]] gelu : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
// CHECK-NEXT: %[[H:.*]] = graph.reshape %[[A]]
// CHECK-NEXT: %[[DY2:.*]] = graph.reshape %[[DY]] : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[DW2:.*]], %[[DB2:.*]] = exec.matmul_bias_grad %[[H]], %[[DY2]] : (tensor<8x16xf32>, tensor<8x8xf32>) -> (tensor<16x8xf32>, tensor<1x1x8xf32>)
// CHECK-NEXT: exec.store %[[DB2]] "db2"
// CHECK-NEXT: exec.store %[[DW2]] "dw2"
// CHECK-NEXT: %[[D:.*]], %[[DB1:.*]] = exec.matmul_gelu_grad %[[DY]], %[[W2]], %[[PRE]] transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<16xf32>)
// CHECK-NEXT: exec.store %[[DB1]] "db1"
// CHECK-NEXT: %[[X2:.*]] = graph.reshape %[[X]]
// CHECK-NEXT: %[[D2:.*]] = graph.reshape %[[D]]
// CHECK-NEXT: graph.matmul %[[X2]], %[[D2]] transpose_lhs
// CHECK-NOT: graph.gelu
// CHECK-NOT: graph.reduce_sum

// -----

// What stays: a gelu_grad of a product used elsewhere too; a sum over
// some of the leading axes only; a weight gradient whose input is loaded
// after the bias's gradient (not a reshape, so not copied to it); a product
// transposing its rhs.
sbp.mesh @m axes ["x"] shape [1]
func.func @stays() attributes {exec.ranks = array<i64: 0>} {
  %dy = exec.load "input" "dy" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %w = exec.load "param" "w" global [8, 8] [B] : tensor<8x8xf32>
  %pre = exec.load "input" "pre" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %0 = graph.matmul %dy, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %1 = graph.gelu_grad %pre, %0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  exec.store %0 "product" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  exec.store %1 "dpre" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %2 = graph.reduce_sum %dy dims [0] : (tensor<2x4x8xf32>) -> tensor<4x8xf32>
  exec.store %2 "partial" global [4, 8] [B] : tensor<4x8xf32>
  %3 = graph.reduce_sum %dy dims [0, 1] : (tensor<2x4x8xf32>) -> tensor<8xf32>
  exec.store %3 "db" global [8] [B] : tensor<8xf32>
  %x = exec.load "input" "x" global [8, 8] [B] : tensor<8x8xf32>
  %dy2 = graph.reshape %dy : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %4 = graph.matmul %x, %dy2 transpose_lhs : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  exec.store %4 "dw" global [8, 8] [B] : tensor<8x8xf32>
  %5 = graph.matmul %x, %dy2 transpose_lhs transpose_rhs : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  exec.store %5 "other" global [8, 8] [B] : tensor<8x8xf32>
  return
}

// CHECK-LABEL: func.func @stays()
// CHECK: graph.matmul
// CHECK-NEXT: graph.gelu_grad
// CHECK: graph.reduce_sum %{{.*}} dims [0] :
// CHECK: graph.reduce_sum %{{.*}} dims [0, 1] :
// CHECK: graph.matmul %{{.*}} transpose_lhs :
// CHECK: graph.matmul %{{.*}} transpose_lhs transpose_rhs
// CHECK-NOT: exec.matmul_
