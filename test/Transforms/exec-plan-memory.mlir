// RUN: sbpc-opt %s --exec-plan-memory | FileCheck %s

// Every value has a place from its op to its last use, first fit, 64-byte
// aligned; a reshape's result shares its input's place (nothing is copied)
// and the place stays taken until neither is used.
sbp.mesh @m axes ["x"] shape [1]
func.func @f() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %r = graph.reshape %x : (tensor<4x8xf32>) -> tensor<32xf32>
  %y = graph.neg %r : tensor<32xf32>
  %s = graph.reshape %r : (tensor<32xf32>) -> tensor<2x16xf32>
  %z = graph.exp %y : tensor<32xf32>
  %t = graph.tanh %s : tensor<2x16xf32>
  exec.store %z "z" global [32] [B] : tensor<32xf32>
  %w = graph.neg %t : tensor<2x16xf32>
  exec.store %w "w" global [2, 16] [B] : tensor<2x16xf32>
  return
}

// CHECK-LABEL: func.func @f()
// CHECK-SAME: exec.arena_bytes = 384
// CHECK: exec.load "input" "x" {{.*}}{exec.offsets = array<i64: 0>}
// CHECK-NEXT: graph.reshape {{.*}}{exec.offsets = array<i64: 0>}
// CHECK-NEXT: graph.neg {{.*}}{exec.offsets = array<i64: 128>}
// CHECK-NEXT: graph.reshape {{.*}}{exec.offsets = array<i64: 0>}
// The place of x, r and s is still taken (t reads s later).
// CHECK-NEXT: graph.exp {{.*}}{exec.offsets = array<i64: 256>}
// y died at exp: t takes its place; x, r and s die at tanh.
// CHECK-NEXT: graph.tanh {{.*}}{exec.offsets = array<i64: 128>}
// CHECK-NEXT: exec.store
// z died at its store: w takes the first free place.
// CHECK-NEXT: graph.neg {{.*}}{exec.offsets = array<i64: 0>}
