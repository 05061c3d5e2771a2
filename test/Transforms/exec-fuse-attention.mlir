// RUN: sbpc-opt %s --exec-fuse --split-input-file | FileCheck %s
// RUN: sbpc-opt %s --exec-fuse=attention=false --split-input-file | FileCheck %s --check-prefix=OFF

// bf16 attention whose probabilities only the product by the values reads
// (inference): the scores' product, the scaled causal softmax and the
// product by the values become one exec.attention, the region attribute
// the last product carried kept; a softmax without mask or scale too.
sbp.mesh @m axes ["x"] shape [1]
func.func @attention() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %k = exec.load "input" "k" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %v = exec.load "input" "v" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %s = exec.load "param" "s" global [] [B] : tensor<bf16>
  %0 = graph.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  %1 = graph.mul %0, %s : (tensor<2x4x8x8xbf16>, tensor<bf16>) -> tensor<2x4x8x8xbf16>
  %2 = graph.causal_mask %1 : tensor<2x4x8x8xbf16>
  %3 = graph.softmax %2 axis = 3 : tensor<2x4x8x8xbf16>
  %4 = graph.matmul %3, %v {graph.region = "h.0"} : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  exec.store %4 "o" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %5 = graph.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  %6 = graph.softmax %5 axis = 3 : tensor<2x4x8x8xbf16>
  %7 = graph.matmul %6, %v : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  exec.store %7 "plain" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  return
}

// CHECK-LABEL: func.func @attention()
// CHECK: %[[Q:.*]] = exec.load "input" "q"
// CHECK: %[[K:.*]] = exec.load "input" "k"
// CHECK: %[[V:.*]] = exec.load "input" "v"
// CHECK: %[[S:.*]] = exec.load "param" "s"
// CHECK-NEXT: %[[O:.*]] = exec.attention %[[Q]], %[[K]], %[[V]] scale %[[S]] causal {graph.region = "h.0"} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<bf16>) -> tensor<2x4x8x16xbf16>
// CHECK-NEXT: exec.store %[[O]] "o"
// CHECK-NEXT: %[[P:.*]] = exec.attention %[[Q]], %[[K]], %[[V]] : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
// CHECK-NEXT: exec.store %[[P]] "plain"
// CHECK-NOT: graph.matmul
// OFF-LABEL: func.func @attention()
// OFF-NOT: exec.attention
// OFF: exec.softmax

// -----

// What stays: probabilities a training step's backward reads too, f32,
// heads of an odd width (9) or wider than 128, values of another width.
sbp.mesh @m axes ["x"] shape [1]
func.func @stays() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %v = exec.load "input" "v" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %0 = graph.matmul %q, %q transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %1 = graph.causal_mask %0 : tensor<2x8x8xbf16>
  %2 = graph.softmax %1 axis = 2 : tensor<2x8x8xbf16>
  %3 = graph.matmul %2, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %3 "o" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %2 "probs" global [2, 8, 8] [B] : tensor<2x8x8xbf16>
  %f = exec.load "input" "f" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  %4 = graph.matmul %f, %f transpose_rhs : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  %5 = graph.softmax %4 axis = 2 : tensor<2x8x8xf32>
  %6 = graph.matmul %5, %f : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  exec.store %6 "f32" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  %n = exec.load "input" "n" global [2, 8, 9] [B] : tensor<2x8x9xbf16>
  %7 = graph.matmul %n, %n transpose_rhs : (tensor<2x8x9xbf16>, tensor<2x8x9xbf16>) -> tensor<2x8x8xbf16>
  %8 = graph.softmax %7 axis = 2 : tensor<2x8x8xbf16>
  %9 = graph.matmul %8, %n : (tensor<2x8x8xbf16>, tensor<2x8x9xbf16>) -> tensor<2x8x9xbf16>
  exec.store %9 "odd" global [2, 8, 9] [B] : tensor<2x8x9xbf16>
  %w = exec.load "input" "w" global [2, 8, 160] [B] : tensor<2x8x160xbf16>
  %10 = graph.matmul %w, %w transpose_rhs : (tensor<2x8x160xbf16>, tensor<2x8x160xbf16>) -> tensor<2x8x8xbf16>
  %11 = graph.softmax %10 axis = 2 : tensor<2x8x8xbf16>
  %12 = graph.matmul %11, %w : (tensor<2x8x8xbf16>, tensor<2x8x160xbf16>) -> tensor<2x8x160xbf16>
  exec.store %12 "wide" global [2, 8, 160] [B] : tensor<2x8x160xbf16>
  %u = exec.load "input" "u" global [2, 8, 32] [B] : tensor<2x8x32xbf16>
  %13 = graph.matmul %q, %q transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %14 = graph.softmax %13 axis = 2 : tensor<2x8x8xbf16>
  %15 = graph.matmul %14, %u : (tensor<2x8x8xbf16>, tensor<2x8x32xbf16>) -> tensor<2x8x32xbf16>
  exec.store %15 "values" global [2, 8, 32] [B] : tensor<2x8x32xbf16>
  return
}

// CHECK-LABEL: func.func @stays()
// CHECK-NOT: exec.attention
// CHECK: return

// -----

// A training step's attention (as --graph-autodiff writes it): the
// forward becomes exec.attention with the log-sum-exp, and the backward
// (p^T dO, dO v^T, the softmax's gradient with the mask's and the scale's,
// ds k, ds^T q) one exec.attention_grad where the first of its products
// was; nothing [..., S, T] is left. Under attention=false, the ops stay.
sbp.mesh @m axes ["x"] shape [1]
func.func @backward() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %k = exec.load "input" "k" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %v = exec.load "input" "v" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %s = exec.load "param" "s" global [] [B] : tensor<bf16>
  %0 = graph.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  %1 = graph.mul %0, %s : (tensor<2x4x8x8xbf16>, tensor<bf16>) -> tensor<2x4x8x8xbf16>
  %2 = graph.causal_mask %1 : tensor<2x4x8x8xbf16>
  %p = graph.softmax %2 axis = 3 {graph.region = "h.0"} : tensor<2x4x8x8xbf16>
  %o = graph.matmul %p, %v {graph.region = "h.0"} : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  exec.store %o "o" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %do = exec.load "input" "do" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %dv = graph.matmul %p, %do transpose_lhs : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  %dp = graph.matmul %do, %v transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  %3 = graph.softmax_grad %p, %dp axis = 3 : (tensor<2x4x8x8xbf16>, tensor<2x4x8x8xbf16>) -> tensor<2x4x8x8xbf16>
  %4 = graph.causal_mask_grad %3 : tensor<2x4x8x8xbf16>
  %ds = graph.mul %s, %4 : (tensor<bf16>, tensor<2x4x8x8xbf16>) -> tensor<2x4x8x8xbf16>
  %dq = graph.matmul %ds, %k : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  %dk = graph.matmul %ds, %q transpose_lhs : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  exec.store %dq "dq" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  exec.store %dk "dk" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  exec.store %dv "dv" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  return
}

// CHECK-LABEL: func.func @backward()
// CHECK: %[[Q:.*]] = exec.load "input" "q"
// CHECK: %[[K:.*]] = exec.load "input" "k"
// CHECK: %[[V:.*]] = exec.load "input" "v"
// CHECK: %[[S:.*]] = exec.load "param" "s"
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = exec.attention %[[Q]], %[[K]], %[[V]] scale %[[S]] causal {graph.region = "h.0"} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<bf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
// CHECK-NEXT: exec.store %[[O]] "o"
// CHECK-NEXT: %[[DO:.*]] = exec.load "input" "do"
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = exec.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] scale %[[S]] causal : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>, tensor<bf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
// CHECK-NEXT: exec.store %[[DQ]] "dq"
// CHECK-NEXT: exec.store %[[DK]] "dk"
// CHECK-NEXT: exec.store %[[DV]] "dv"
// CHECK-NEXT: return
// OFF-LABEL: func.func @backward()
// OFF-NOT: exec.attention
// OFF: exec.softmax_grad
// OFF: return

// -----

// Under --recompute selective the forward is an exec.attention already and
// the backward recomputes the probabilities: that exec.attention gains the
// log-sum-exp and the recomputation goes. An unmasked, unscaled softmax
// (graph.softmax_grad) with fewer queries (5) than keys (7) too.
sbp.mesh @m axes ["x"] shape [1]
func.func @recomputed() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 5, 16] [B] : tensor<2x5x16xbf16>
  %k = exec.load "input" "k" global [2, 7, 16] [B] : tensor<2x7x16xbf16>
  %v = exec.load "input" "v" global [2, 7, 16] [B] : tensor<2x7x16xbf16>
  %o = exec.attention %q, %k, %v {graph.selective} : (tensor<2x5x16xbf16>, tensor<2x7x16xbf16>, tensor<2x7x16xbf16>) -> tensor<2x5x16xbf16>
  exec.store %o "o" global [2, 5, 16] [B] : tensor<2x5x16xbf16>
  %do = exec.load "input" "do" global [2, 5, 16] [B] : tensor<2x5x16xbf16>
  %dp = graph.matmul %do, %v transpose_rhs : (tensor<2x5x16xbf16>, tensor<2x7x16xbf16>) -> tensor<2x5x7xbf16>
  %0 = graph.matmul %q, %k transpose_rhs {graph.selective} : (tensor<2x5x16xbf16>, tensor<2x7x16xbf16>) -> tensor<2x5x7xbf16>
  %p = graph.softmax %0 axis = 2 {graph.selective} : tensor<2x5x7xbf16>
  %dv = graph.matmul %p, %do transpose_lhs : (tensor<2x5x7xbf16>, tensor<2x5x16xbf16>) -> tensor<2x7x16xbf16>
  %ds = graph.softmax_grad %p, %dp axis = 2 : (tensor<2x5x7xbf16>, tensor<2x5x7xbf16>) -> tensor<2x5x7xbf16>
  %dq = graph.matmul %ds, %k : (tensor<2x5x7xbf16>, tensor<2x7x16xbf16>) -> tensor<2x5x16xbf16>
  %dk = graph.matmul %ds, %q transpose_lhs : (tensor<2x5x7xbf16>, tensor<2x5x16xbf16>) -> tensor<2x7x16xbf16>
  exec.store %dq "dq" global [2, 5, 16] [B] : tensor<2x5x16xbf16>
  exec.store %dk "dk" global [2, 7, 16] [B] : tensor<2x7x16xbf16>
  exec.store %dv "dv" global [2, 7, 16] [B] : tensor<2x7x16xbf16>
  return
}

// CHECK-LABEL: func.func @recomputed()
// CHECK: %[[O:.*]], %[[LSE:.*]] = exec.attention %[[Q:.*]], %[[K:.*]], %[[V:.*]] {graph.selective} : (tensor<2x5x16xbf16>, tensor<2x7x16xbf16>, tensor<2x7x16xbf16>) -> (tensor<2x5x16xbf16>, tensor<2x5xf32>)
// CHECK-NEXT: exec.store %[[O]] "o"
// CHECK-NEXT: %[[DO:.*]] = exec.load "input" "do"
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = exec.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] : {{.*}} -> (tensor<2x5x16xbf16>, tensor<2x7x16xbf16>, tensor<2x7x16xbf16>)
// CHECK-NOT: graph.
// CHECK: return

// The same as the pass finds it (the forward still graph ops, fused in the
// same run), scaled and masked.
func.func @recomputed_graph() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %k = exec.load "input" "k" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %v = exec.load "input" "v" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %s = exec.load "param" "s" global [] [B] : tensor<bf16>
  %0 = graph.matmul %q, %k transpose_rhs {graph.selective} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %1 = graph.mul %0, %s {graph.selective} : (tensor<2x8x8xbf16>, tensor<bf16>) -> tensor<2x8x8xbf16>
  %2 = graph.causal_mask %1 {graph.selective} : tensor<2x8x8xbf16>
  %3 = graph.softmax %2 axis = 2 {graph.selective} : tensor<2x8x8xbf16>
  %o = graph.matmul %3, %v {graph.selective} : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %o "o" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %do = exec.load "input" "do" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %dp = graph.matmul %do, %v transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %4 = graph.matmul %q, %k transpose_rhs {graph.selective} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %5 = graph.mul %4, %s {graph.selective} : (tensor<2x8x8xbf16>, tensor<bf16>) -> tensor<2x8x8xbf16>
  %6 = graph.causal_mask %5 {graph.selective} : tensor<2x8x8xbf16>
  %p = graph.softmax %6 axis = 2 {graph.selective} : tensor<2x8x8xbf16>
  %dv = graph.matmul %p, %do transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %7 = graph.softmax_grad %p, %dp axis = 2 : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %8 = graph.causal_mask_grad %7 : tensor<2x8x8xbf16>
  %ds = graph.mul %8, %s : (tensor<2x8x8xbf16>, tensor<bf16>) -> tensor<2x8x8xbf16>
  %dq = graph.matmul %ds, %k : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dk = graph.matmul %ds, %q transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %dq "dq" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dk "dk" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dv "dv" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  return
}

// CHECK-LABEL: func.func @recomputed_graph()
// CHECK: %[[O:.*]], %[[LSE:.*]] = exec.attention %[[Q:.*]], %[[K:.*]], %[[V:.*]] scale %[[S:.*]] causal {graph.selective} : {{.*}} -> (tensor<2x8x16xbf16>, tensor<2x8xf32>)
// CHECK-NEXT: exec.store %[[O]] "o"
// CHECK-NEXT: %[[DO:.*]] = exec.load "input" "do"
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = exec.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] scale %[[S]] causal : {{.*}} -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>)
// CHECK-NOT: graph.
// CHECK: return

// -----

// What stays: probabilities something else reads too (here stored), a
// gradient of the scores something else reads, f32; a forward
// exec.attention of other values (the second function).
sbp.mesh @m axes ["x"] shape [1]
func.func @backward_stays() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %v = exec.load "input" "v" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %do = exec.load "input" "do" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %0 = graph.matmul %q, %q transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %p = graph.softmax %0 axis = 2 : tensor<2x8x8xbf16>
  %o = graph.matmul %p, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %p "probs" global [2, 8, 8] [B] : tensor<2x8x8xbf16>
  %dv = graph.matmul %p, %do transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dp = graph.matmul %do, %v transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %ds = graph.softmax_grad %p, %dp axis = 2 : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %dq = graph.matmul %ds, %q : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dk = graph.matmul %ds, %q transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %o "o" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dq "dq" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dk "dk" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dv "dv" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %1 = graph.matmul %q, %v transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %p1 = graph.softmax %1 axis = 2 : tensor<2x8x8xbf16>
  %o1 = graph.matmul %p1, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dv1 = graph.matmul %p1, %do transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dp1 = graph.matmul %do, %v transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %ds1 = graph.softmax_grad %p1, %dp1 axis = 2 : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %dq1 = graph.matmul %ds1, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dk1 = graph.matmul %ds1, %q transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %ds1 "ds" global [2, 8, 8] [B] : tensor<2x8x8xbf16>
  exec.store %o1 "o1" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dq1 "dq1" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dk1 "dk1" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dv1 "dv1" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %f = exec.load "input" "f" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  %3 = graph.matmul %f, %f transpose_rhs : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  %p3 = graph.softmax %3 axis = 2 : tensor<2x8x8xf32>
  %o3 = graph.matmul %p3, %f : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dv3 = graph.matmul %p3, %f transpose_lhs : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dp3 = graph.matmul %f, %f transpose_rhs : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  %ds3 = graph.softmax_grad %p3, %dp3 axis = 2 : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq3 = graph.matmul %ds3, %f : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dk3 = graph.matmul %ds3, %f transpose_lhs : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  exec.store %o3 "o3" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  exec.store %dq3 "dq3" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  exec.store %dk3 "dk3" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  exec.store %dv3 "dv3" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  return
}

// CHECK-LABEL: func.func @backward_stays()
// CHECK-NOT: exec.attention
// CHECK: return

func.func @backward_other_forward() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %v = exec.load "input" "v" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %do = exec.load "input" "do" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %o2 = exec.attention %q, %q, %do : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %2 = graph.matmul %q, %q transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %p2 = graph.softmax %2 axis = 2 : tensor<2x8x8xbf16>
  %dv2 = graph.matmul %p2, %do transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dp2 = graph.matmul %do, %v transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %ds2 = graph.softmax_grad %p2, %dp2 axis = 2 : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %dq2 = graph.matmul %ds2, %q : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %dk2 = graph.matmul %ds2, %q transpose_lhs : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %o2 "o2" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dq2 "dq2" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dk2 "dk2" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %dv2 "dv2" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  return
}

// CHECK-LABEL: func.func @backward_other_forward()
// CHECK-NOT: exec.attention_grad
// CHECK: exec.attention %{{.*}} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
// CHECK-NOT: exec.attention
// CHECK: return
