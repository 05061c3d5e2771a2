// RUN: sbpc-opt %s --exec-fuse | FileCheck %s

// Causal attention's six batched products become exec.causal_matmul:
// those by the probabilities or their gradient, which are 0 above the
// diagonal (lower_lhs, transposed or not), and those whose result only a
// causal softmax or its gradient reads (lower_result).
sbp.mesh @m axes ["x"] shape [1]
func.func @attention() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  %k = exec.load "input" "k" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  %v = exec.load "input" "v" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  %do = exec.load "input" "do" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  %s = exec.load "param" "s" global [] [B] : tensor<f32>
  %scores = graph.matmul %q, %k transpose_rhs : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x4xf32>
  %0 = graph.mul %scores, %s : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %1 = graph.causal_mask %0 : tensor<2x4x4xf32>
  %p = graph.softmax %1 axis = 2 : tensor<2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  exec.store %o "o" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  %dp = graph.matmul %do, %v transpose_rhs : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x4xf32>
  %dv = graph.matmul %p, %do transpose_lhs : (tensor<2x4x4xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  exec.store %dv "dv" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  %g = graph.softmax_grad %p, %dp axis = 2 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %gm = graph.causal_mask_grad %g : tensor<2x4x4xf32>
  %ds = graph.mul %s, %gm : (tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %dq = graph.matmul %ds, %k : (tensor<2x4x4xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  exec.store %dq "dq" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  %dk = graph.matmul %ds, %q transpose_lhs : (tensor<2x4x4xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  exec.store %dk "dk" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  return
}

// CHECK-LABEL: func.func @attention()
// CHECK: %[[Q:.*]] = exec.load "input" "q"
// CHECK: %[[K:.*]] = exec.load "input" "k"
// CHECK: %[[V:.*]] = exec.load "input" "v"
// CHECK: %[[DO:.*]] = exec.load "input" "do"
// CHECK: %[[S:.*]] = exec.causal_matmul %[[Q]], %[[K]] transpose_rhs lower_result :
// CHECK-NEXT: %[[P:.*]] = exec.softmax %[[S]] scale
// CHECK-NEXT: exec.causal_matmul %[[P]], %[[V]] lower_lhs :
// CHECK: %[[DP:.*]] = exec.causal_matmul %[[DO]], %[[V]] transpose_rhs lower_result :
// CHECK-NEXT: exec.causal_matmul %[[P]], %[[DO]] transpose_lhs lower_lhs :
// CHECK: %[[DS:.*]] = exec.softmax_grad %[[P]], %[[DP]] scale
// CHECK-NEXT: exec.causal_matmul %[[DS]], %[[K]] lower_lhs :
// CHECK: exec.causal_matmul %[[DS]], %[[Q]] transpose_lhs lower_lhs :
// CHECK-NOT: graph.matmul
// CHECK: return

// Left alone: scores read by something other than a causal softmax (here
// stored too), a softmax without the mask, the probabilities as the rhs
// (their zeros are not where a row of the result stops), and a product
// that a softmax gradient reads as its probabilities.
func.func @other() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [4, 3] [B] : tensor<4x3xf32>
  %k = exec.load "input" "k" global [4, 3] [B] : tensor<4x3xf32>
  %v = exec.load "input" "v" global [4, 4] [B] : tensor<4x4xf32>
  %scores = graph.matmul %q, %k transpose_rhs : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x4xf32>
  exec.store %scores "scores" global [4, 4] [B] : tensor<4x4xf32>
  %0 = graph.causal_mask %scores : tensor<4x4xf32>
  %p = graph.softmax %0 axis = 1 : tensor<4x4xf32>
  %o = graph.matmul %v, %p : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.store %o "o" global [4, 4] [B] : tensor<4x4xf32>
  %unmasked = graph.matmul %q, %k transpose_rhs : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x4xf32>
  %pu = graph.softmax %unmasked axis = 1 : tensor<4x4xf32>
  %ou = graph.matmul %pu, %v : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.store %ou "ou" global [4, 4] [B] : tensor<4x4xf32>
  %pp = graph.matmul %q, %k transpose_rhs : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x4xf32>
  %g = graph.softmax_grad %pp, %v axis = 1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %gm = graph.causal_mask_grad %g : tensor<4x4xf32>
  exec.store %gm "g" global [4, 4] [B] : tensor<4x4xf32>
  return
}

// CHECK-LABEL: func.func @other()
// CHECK-NOT: exec.causal_matmul
// CHECK: return
