// RUN: sbpc-opt %s --exec-fuse --split-input-file | FileCheck %s

// A linear layer and its GELU become one exec.linear, and so does one and
// the residual add after it (the product's only use, the other operand of
// the sum's type). The bias may come first, the weight may be transposed,
// and the region attribute the GELU carried stays on the op that replaces
// it.
sbp.mesh @m axes ["x"] shape [1]
func.func @mlp() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %w = exec.load "param" "w" global [8, 16] [B] : tensor<8x16xf32>
  %b = exec.load "param" "b" global [16] [B] : tensor<16xf32>
  %v = exec.load "param" "v" global [8, 16] [B] : tensor<8x16xf32>
  %c = exec.load "param" "c" global [8] [B] : tensor<8xf32>
  %0 = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %1 = graph.add %0, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %2 = graph.gelu %1 {graph.region = "b0"} : tensor<2x4x16xf32>
  %3 = graph.matmul %2, %v transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %4 = graph.add %c, %3 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %5 = graph.add %4, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %6 = graph.tanh %5 : tensor<2x4x8xf32>
  exec.store %6 "y" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  return
}

// CHECK-LABEL: func.func @mlp()
// CHECK: %[[X:.*]] = exec.load "input" "x"
// CHECK: %[[W:.*]] = exec.load "param" "w"
// CHECK: %[[B:.*]] = exec.load "param" "b"
// CHECK: %[[V:.*]] = exec.load "param" "v"
// CHECK: %[[C:.*]] = exec.load "param" "c"
// CHECK-NOT: graph.matmul
// CHECK: %[[H:.*]] = exec.linear %[[X]], %[[W]], %[[B]] gelu {graph.region = "b0"} : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[O:.*]] = exec.linear %[[H]], %[[V]], %[[C]] residual %[[X]] transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.tanh %[[O]]
// CHECK-NOT: graph.gelu
// CHECK: exec.store %[[Y]] "y"

// -----

// Residual adds that stay: after a GELU, of a broadcast operand, of a
// product used twice; the residual's add goes where the add was, after
// the operand it reads.
sbp.mesh @m axes ["x"] shape [1]
func.func @residuals() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 8] [B] : tensor<8x8xf32>
  %b = exec.load "param" "b" global [8] [B] : tensor<8xf32>
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = graph.add %0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %2 = graph.gelu %1 : tensor<4x8xf32>
  %3 = graph.add %2, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  exec.store %3 "gelu" global [4, 8] [B] : tensor<4x8xf32>
  %4 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %5 = graph.add %4, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %6 = graph.add %5, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  exec.store %6 "broadcast" global [4, 8] [B] : tensor<4x8xf32>
  %7 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %8 = graph.add %7, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %9 = graph.add %8, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  exec.store %8 "twice" global [4, 8] [B] : tensor<4x8xf32>
  exec.store %9 "sum" global [4, 8] [B] : tensor<4x8xf32>
  %10 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %11 = graph.add %10, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = exec.load "input" "r" global [4, 8] [B] : tensor<4x8xf32>
  %12 = graph.add %r, %11 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  exec.store %12 "later" global [4, 8] [B] : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @residuals()
// CHECK: %[[X:.*]] = exec.load "input" "x"
// CHECK: %[[G:.*]] = exec.linear %[[X]], %{{.*}}, %{{.*}} gelu :
// CHECK-NEXT: graph.add %[[G]], %[[X]]
// CHECK: %[[L:.*]] = exec.linear %[[X]], %{{.*}}, %{{.*}} :
// CHECK-NEXT: graph.add %[[L]], %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>)
// CHECK: %[[T:.*]] = exec.linear %[[X]], %{{.*}}, %{{.*}} :
// CHECK-NEXT: graph.add %[[T]], %[[X]]
// CHECK: %[[R:.*]] = exec.load "input" "r"
// CHECK-NEXT: exec.linear %[[X]], %{{.*}}, %{{.*}} residual %[[R]] :

// -----

// Training keeps the sum for the GELU's gradient: the linear layer takes
// the GELU and keeps the sum as its second result. Not fused: a product used twice, a transposed input, a batched
// (per-entry) right operand, a bias that is not [N] (a [1, N] row, a full
// [M, N] matrix).
sbp.mesh @m axes ["x"] shape [1]
func.func @kept() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 8] [B] : tensor<8x8xf32>
  %b = exec.load "param" "b" global [8] [B] : tensor<8xf32>
  %r = exec.load "param" "r" global [1, 8] [B] : tensor<1x8xf32>
  %m = exec.load "param" "m" global [4, 8] [B] : tensor<4x8xf32>
  %p = exec.load "input" "p" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %q = exec.load "input" "q" global [2, 8, 8] [B] : tensor<2x8x8xf32>
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = graph.add %0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %2 = graph.gelu %1 : tensor<4x8xf32>
  exec.store %2 "h" global [4, 8] [B] : tensor<4x8xf32>
  %dy = exec.load "input" "dy" global [4, 8] [B] : tensor<4x8xf32>
  %3 = graph.gelu_grad %1, %dy : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  exec.store %3 "train" global [4, 8] [B] : tensor<4x8xf32>
  %4 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %5 = graph.add %4, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  exec.store %4 "twice" global [4, 8] [B] : tensor<4x8xf32>
  exec.store %5 "sum" global [4, 8] [B] : tensor<4x8xf32>
  %6 = graph.matmul %x, %m transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %7 = graph.add %6, %b : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  exec.store %7 "tlhs" global [8, 8] [B] : tensor<8x8xf32>
  %8 = graph.matmul %p, %q : (tensor<2x4x8xf32>, tensor<2x8x8xf32>) -> tensor<2x4x8xf32>
  %9 = graph.add %8, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  exec.store %9 "batched" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %10 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %11 = graph.add %10, %r : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  exec.store %11 "row" global [4, 8] [B] : tensor<4x8xf32>
  %12 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %13 = graph.add %12, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  exec.store %13 "full" global [4, 8] [B] : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @kept()
// CHECK: %[[H:.*]], %[[S:.*]] = exec.linear %{{.*}}, %{{.*}}, %{{.*}} gelu : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: exec.store %[[H]] "h"
// CHECK: graph.gelu_grad %[[S]], %
// CHECK-NOT: exec.linear
// CHECK: graph.matmul
// CHECK-NEXT: graph.add
// CHECK: graph.matmul {{.*}} transpose_lhs
// CHECK-NEXT: graph.add
// CHECK: graph.matmul {{.*}} (tensor<2x4x8xf32>, tensor<2x8x8xf32>)
// CHECK-NEXT: graph.add
// CHECK: graph.matmul
// CHECK-NEXT: graph.add {{.*}} tensor<1x8xf32>
// CHECK: graph.matmul
// CHECK-NEXT: graph.add {{.*}} (tensor<4x8xf32>, tensor<4x8xf32>)

// -----

// bf16 (after --exec-bf16) fuses the same way.
sbp.mesh @m axes ["x"] shape [1]
func.func @bf16() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 8] [B] : tensor<8x8xf32>
  %b = exec.load "param" "b" global [8] [B] : tensor<8xf32>
  %xb = exec.convert %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %wb = exec.convert %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %bb = exec.convert %b : tensor<8xf32> to tensor<8xbf16>
  %0 = graph.matmul %xb, %wb : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %1 = graph.add %0, %bb : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %2 = graph.gelu %1 : tensor<4x8xbf16>
  %3 = exec.convert %2 : tensor<4x8xbf16> to tensor<4x8xf32>
  exec.store %3 "y" global [4, 8] [B] : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @bf16()
// CHECK: exec.linear %{{.*}}, %{{.*}}, %{{.*}} gelu : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>

// -----

// GPT's query, key and value: linear layers on one input by the slices
// w[:, g, :] and b[g, :] of one weight and one bias (in any order) become
// one linear layer by the whole weight, and slices of its product.
sbp.mesh @m axes ["x"] shape [1]
func.func @qkv() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %w = exec.load "param" "w" global [8, 3, 16] [B] : tensor<8x3x16xf32>
  %b = exec.load "param" "b" global [3, 16] [B] : tensor<3x16xf32>
  %w1s = graph.slice %w starts [0, 1, 0] limits [8, 2, 16] : (tensor<8x3x16xf32>) -> tensor<8x1x16xf32>
  %w1 = graph.reshape %w1s : (tensor<8x1x16xf32>) -> tensor<8x16xf32>
  %b1s = graph.slice %b starts [1, 0] limits [2, 16] : (tensor<3x16xf32>) -> tensor<1x16xf32>
  %b1 = graph.reshape %b1s : (tensor<1x16xf32>) -> tensor<16xf32>
  %m1 = graph.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %k = graph.add %m1, %b1 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %w0s = graph.slice %w starts [0, 0, 0] limits [8, 1, 16] : (tensor<8x3x16xf32>) -> tensor<8x1x16xf32>
  %w0 = graph.reshape %w0s : (tensor<8x1x16xf32>) -> tensor<8x16xf32>
  %b0s = graph.slice %b starts [0, 0] limits [1, 16] : (tensor<3x16xf32>) -> tensor<1x16xf32>
  %b0 = graph.reshape %b0s : (tensor<1x16xf32>) -> tensor<16xf32>
  %m0 = graph.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %q = graph.add %m0, %b0 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %w2s = graph.slice %w starts [0, 2, 0] limits [8, 3, 16] : (tensor<8x3x16xf32>) -> tensor<8x1x16xf32>
  %w2 = graph.reshape %w2s : (tensor<8x1x16xf32>) -> tensor<8x16xf32>
  %b2s = graph.slice %b starts [2, 0] limits [3, 16] : (tensor<3x16xf32>) -> tensor<1x16xf32>
  %b2 = graph.reshape %b2s : (tensor<1x16xf32>) -> tensor<16xf32>
  %m2 = graph.matmul %x, %w2 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %v = graph.add %m2, %b2 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  exec.store %q "q" global [2, 4, 16] [B] : tensor<2x4x16xf32>
  exec.store %k "k" global [2, 4, 16] [B] : tensor<2x4x16xf32>
  exec.store %v "v" global [2, 4, 16] [B] : tensor<2x4x16xf32>
  // The backward's use of a weight's slice keeps it.
  exec.store %w2 "w2" global [8, 16] [B] : tensor<8x16xf32>
  return
}

// CHECK-LABEL: func.func @qkv()
// CHECK: %[[X:.*]] = exec.load "input" "x"
// CHECK: %[[W:.*]] = exec.load "param" "w"
// CHECK: %[[B:.*]] = exec.load "param" "b"
// CHECK-NEXT: %[[WW:.*]] = graph.reshape %[[W]] : (tensor<8x3x16xf32>) -> tensor<8x48xf32>
// CHECK-NEXT: %[[BB:.*]] = graph.reshape %[[B]] : (tensor<3x16xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[Y:.*]] = exec.linear %[[X]], %[[WW]], %[[BB]] : (tensor<2x4x8xf32>, tensor<8x48xf32>, tensor<48xf32>) -> tensor<2x4x48xf32>
// CHECK-NEXT: %[[G:.*]] = graph.reshape %[[Y]] : (tensor<2x4x48xf32>) -> tensor<2x4x3x16xf32>
// CHECK-NEXT: %[[Q0:.*]] = graph.slice %[[G]] starts [0, 0, 0, 0] limits [2, 4, 1, 16]
// CHECK-NEXT: %[[Q:.*]] = graph.reshape %[[Q0]] : (tensor<2x4x1x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[K0:.*]] = graph.slice %[[G]] starts [0, 0, 1, 0] limits [2, 4, 2, 16]
// CHECK-NEXT: %[[K:.*]] = graph.reshape %[[K0]]
// CHECK-NEXT: %[[V0:.*]] = graph.slice %[[G]] starts [0, 0, 2, 0] limits [2, 4, 3, 16]
// CHECK-NEXT: %[[V:.*]] = graph.reshape %[[V0]]
// CHECK-NOT: exec.linear
// CHECK: %[[W2S:.*]] = graph.slice %[[W]] starts [0, 2, 0] limits [8, 3, 16]
// CHECK-NEXT: %[[W2:.*]] = graph.reshape %[[W2S]]
// CHECK-NOT: graph.slice
// CHECK: exec.store %[[Q]] "q"
// CHECK-NEXT: exec.store %[[K]] "k"
// CHECK-NEXT: exec.store %[[V]] "v"
// CHECK-NEXT: exec.store %[[W2]] "w2"

// -----

// Not fused: a group without every slice, and slices of one weight read by
// linear layers on different inputs.
sbp.mesh @m axes ["x"] shape [1]
func.func @partial() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %z = exec.load "input" "z" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 2, 16] [B] : tensor<8x2x16xf32>
  %b = exec.load "param" "b" global [2, 16] [B] : tensor<2x16xf32>
  %w0s = graph.slice %w starts [0, 0, 0] limits [8, 1, 16] : (tensor<8x2x16xf32>) -> tensor<8x1x16xf32>
  %w0 = graph.reshape %w0s : (tensor<8x1x16xf32>) -> tensor<8x16xf32>
  %b0s = graph.slice %b starts [0, 0] limits [1, 16] : (tensor<2x16xf32>) -> tensor<1x16xf32>
  %b0 = graph.reshape %b0s : (tensor<1x16xf32>) -> tensor<16xf32>
  %w1s = graph.slice %w starts [0, 1, 0] limits [8, 2, 16] : (tensor<8x2x16xf32>) -> tensor<8x1x16xf32>
  %w1 = graph.reshape %w1s : (tensor<8x1x16xf32>) -> tensor<8x16xf32>
  %b1s = graph.slice %b starts [1, 0] limits [2, 16] : (tensor<2x16xf32>) -> tensor<1x16xf32>
  %b1 = graph.reshape %b1s : (tensor<1x16xf32>) -> tensor<16xf32>
  %m0 = graph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y0 = graph.add %m0, %b0 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %m1 = graph.matmul %z, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y1 = graph.add %m1, %b1 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  exec.store %y0 "y0" global [4, 16] [B] : tensor<4x16xf32>
  exec.store %y1 "y1" global [4, 16] [B] : tensor<4x16xf32>
  return
}

// CHECK-LABEL: func.func @partial()
// CHECK-COUNT-2: exec.linear {{.*}} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: exec.linear
