// RUN: sbpc-opt %s --split-input-file --exec-plan-memory=placement=in-order | FileCheck %s
// RUN: sbpc-opt %s --split-input-file --exec-plan-memory=placement=largest-first | FileCheck %s --check-prefix=LARGEST
// RUN: sbpc-opt %s --split-input-file --exec-plan-memory | FileCheck %s --check-prefix=SMALLER
// RUN: not sbpc-opt %s --split-input-file --exec-plan-memory=placement=best 2>&1 | FileCheck %s --check-prefix=BAD

// In program order, every value has a place from its op to its last use,
// first fit, 64-byte aligned; a reshape's result shares its input's place (nothing is copied)
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

// -----

// First fit in program order leaves a hole: s (64 B, to the end) goes
// above x (1 KiB), y above both; when x and y are gone, z (2 KiB) does not
// fit in x's place. Largest first, z goes at 0, x too (they never live at
// once), y above x, and s above all: 2112 bytes against 3136. The default
// takes the smaller plan.
sbp.mesh @m axes ["x"] shape [1]
func.func @g() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [256] [B] : tensor<256xf32>
  %s = exec.load "input" "s" global [16] [B] : tensor<16xf32>
  %y = graph.neg %x : tensor<256xf32>
  exec.store %y "y" global [256] [B] : tensor<256xf32>
  %z = exec.load "input" "z" global [512] [B] : tensor<512xf32>
  exec.store %z "z" global [512] [B] : tensor<512xf32>
  exec.store %s "s" global [16] [B] : tensor<16xf32>
  return
}

// CHECK-LABEL: func.func @g()
// CHECK-SAME: exec.arena_bytes = 3136
// CHECK: exec.load "input" "x" {{.*}}{exec.offsets = array<i64: 0>}
// CHECK-NEXT: exec.load "input" "s" {{.*}}{exec.offsets = array<i64: 1024>}
// CHECK-NEXT: graph.neg {{.*}}{exec.offsets = array<i64: 1088>}
// CHECK: exec.load "input" "z" {{.*}}{exec.offsets = array<i64: 1088>}

// Largest first (all of @f's are 128 bytes: first made, first placed) the
// reshapes share their input's place too, and the plan is the same.
// LARGEST-LABEL: func.func @f()
// LARGEST-SAME: exec.arena_bytes = 384
// LARGEST: exec.load "input" "x" {{.*}}{exec.offsets = array<i64: 0>}
// LARGEST-NEXT: graph.reshape {{.*}}{exec.offsets = array<i64: 0>}
// LARGEST-NEXT: graph.neg {{.*}}{exec.offsets = array<i64: 128>}
// LARGEST-NEXT: graph.reshape {{.*}}{exec.offsets = array<i64: 0>}
// LARGEST-NEXT: graph.exp {{.*}}{exec.offsets = array<i64: 256>}
// LARGEST-NEXT: graph.tanh {{.*}}{exec.offsets = array<i64: 128>}
// LARGEST-NEXT: exec.store
// LARGEST-NEXT: graph.neg {{.*}}{exec.offsets = array<i64: 0>}

// LARGEST-LABEL: func.func @g()
// LARGEST-SAME: exec.arena_bytes = 2112
// LARGEST: exec.load "input" "x" {{.*}}{exec.offsets = array<i64: 0>}
// LARGEST-NEXT: exec.load "input" "s" {{.*}}{exec.offsets = array<i64: 2048>}
// LARGEST-NEXT: graph.neg {{.*}}{exec.offsets = array<i64: 1024>}
// LARGEST: exec.load "input" "z" {{.*}}{exec.offsets = array<i64: 0>}

// SMALLER-LABEL: func.func @f()
// SMALLER-SAME: exec.arena_bytes = 384
// SMALLER-LABEL: func.func @g()
// SMALLER-SAME: exec.arena_bytes = 2112

// BAD: error: exec-plan-memory: placement must be smaller, in-order or largest-first, got 'best'
