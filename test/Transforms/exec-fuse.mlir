// RUN: sbpc-opt %s --exec-fuse | FileCheck %s
// RUN: sbpc-opt %s --exec-fuse --exec-plan-memory | FileCheck %s --check-prefix=MEM

// Bias + GELU, then a residual add whose other operand has two uses; a
// value used twice ends a chain, an op alone stays, an intermediate of
// another shape (the exp of the bias) is an input, not part of the chain.
sbp.mesh @m axes ["x"] shape [1]
func.func @f() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %b = exec.load "param" "b" global [8] [B] : tensor<8xf32>
  %0 = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = graph.gelu %0 : tensor<4x8xf32>
  %2 = graph.mul %1, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = graph.tanh %2 : tensor<4x8xf32>
  exec.store %2 "twice" global [4, 8] [B] : tensor<4x8xf32>
  %e = graph.exp %b : tensor<8xf32>
  %4 = graph.sub %3, %e : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %5 = graph.neg %4 : tensor<4x8xf32>
  exec.store %5 "y" global [4, 8] [B] : tensor<4x8xf32>
  %6 = graph.relu %x : tensor<4x8xf32>
  exec.store %6 "alone" global [4, 8] [B] : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @f()
// CHECK: %[[X:.*]] = exec.load "input" "x"
// CHECK: %[[B:.*]] = exec.load "param" "b"
// CHECK: %[[T:.*]] = exec.fused(%[[X]], %[[B]]) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<4x8xf32>, %[[A1:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[S:.*]] = graph.add %[[A0]], %[[A1]]
// CHECK-NEXT: %[[G:.*]] = graph.gelu %[[S]]
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[G]], %[[A0]]
// CHECK-NEXT: exec.yield %[[M]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK: exec.store %[[T]] "twice"
// CHECK: %[[E:.*]] = graph.exp %[[B]] : tensor<8xf32>
// CHECK: %[[Y:.*]] = exec.fused(%[[T]], %[[E]]) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK: graph.tanh
// CHECK-NEXT: graph.sub
// CHECK-NEXT: graph.neg
// CHECK-NEXT: exec.yield
// CHECK: exec.store %[[Y]] "y"
// CHECK: %[[R:.*]] = graph.relu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: exec.store %[[R]] "alone"

// The fused ops take one arena place each; their bodies take none.
// MEM: exec.fused(%{{.*}}) {exec.offsets = array<i64: {{[0-9]+}}>} :
// MEM-NEXT: ^bb0
// MEM-NOT: exec.offsets
// MEM: exec.yield

// A sum over micro-batches (graph.accumulate adds) is not fused into one op
// at its end: each add runs as its micro-batch's term is made, so that the
// terms do not all live until the last micro-batch's. A term's own chain
// (its neg) still fuses into its add, but not the first micro-batch's
// term (operand 0 of the first add, made a micro-batch earlier).
func.func @sum() attributes {exec.ranks = array<i64: 0>} {
  %a0 = exec.load "input" "a0" global [4, 8] [B] : tensor<4x8xf32>
  %b0 = exec.load "input" "b0" global [4, 8] [B] : tensor<4x8xf32>
  %g0 = graph.add %a0, %b0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g1 = exec.load "input" "g1" global [4, 8] [B] : tensor<4x8xf32>
  %t1 = graph.neg %g1 : tensor<4x8xf32>
  %s1 = graph.add %g0, %t1 {graph.accumulate} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g2 = exec.load "input" "g2" global [4, 8] [B] : tensor<4x8xf32>
  %t2 = graph.neg %g2 : tensor<4x8xf32>
  %s2 = graph.add %s1, %t2 {graph.accumulate} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  exec.store %s2 "sum" global [4, 8] [B] : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @sum()
// CHECK: %[[G0:.*]] = graph.add
// CHECK: %[[G1:.*]] = exec.load "input" "g1"
// CHECK: %[[S1:.*]] = exec.fused(%[[G1]], %[[G0]])
// CHECK: graph.neg
// CHECK-NEXT: graph.add {{.*}} {graph.accumulate}
// CHECK: %[[G2:.*]] = exec.load "input" "g2"
// CHECK: %[[S2:.*]] = exec.fused(%[[G2]], %[[S1]])
// CHECK: exec.store %[[S2]] "sum"
