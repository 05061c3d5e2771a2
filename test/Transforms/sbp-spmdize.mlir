// RUN: sbpc-opt %s --split-input-file --sbp-layout --sbp-spmdize --verify-diagnostics | FileCheck %s
// RUN: sbpc-opt %s --split-input-file --sbp-layout --sbp-spmdize --exec-plan-memory=placement=in-order --verify-diagnostics | FileCheck %s --check-prefix=MEM
// RUN: sbpc-opt %s --split-input-file --sbp-layout --sbp-spmdize --exec-plan-memory=placement=largest-first --verify-diagnostics | FileCheck %s --check-prefix=LARGEST

// Every kind of hop on a 2 x 2 mesh: arguments load their shards, the
// matmul runs on local shapes, each boxing hop is one collective or local
// op on its mesh axis, and results store their shards.

// CHECK-LABEL: func.func @f()
// CHECK-SAME: exec.ranks = array<i64: 0, 1, 2, 3>
// CHECK: %[[W:.*]] = exec.load "param" "w" global [4, 6] [B, S(0)] : tensor<2x6xf32>
// CHECK: %[[X:.*]] = exec.load "input" "x" global [8, 4] [S(0), B] : tensor<4x4xf32>
// CHECK: %[[XS:.*]] = exec.local_slice %[[X]] axis 1 dim 1 : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK: %[[Y:.*]] = graph.matmul %[[XS]], %[[W]] : (tensor<4x2xf32>, tensor<2x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[S:.*]] = exec.reduce_scatter %[[Y]] axis 1 dim 1 "sum" : tensor<4x6xf32> -> tensor<4x3xf32>
// CHECK: exec.all_gather %[[S]] axis 0 dim 0 : tensor<4x3xf32> -> tensor<8x3xf32>
// CHECK: exec.all_to_all {{.*}} axis 1 split 0 concat 1 : tensor<8x3xf32> -> tensor<4x6xf32>
// CHECK: exec.local_slice {{.*}} axis 0 dim 1 : tensor<4x6xf32> -> tensor<4x3xf32>
// CHECK: exec.zero_pad {{.*}} axis 0 dim 1 "sum" : tensor<4x3xf32> -> tensor<4x6xf32>
// CHECK: exec.reduce_scatter {{.*}} axis 0 dim 1 "sum"
// CHECK: exec.all_gather {{.*}} axis 1 dim 0
// CHECK: %[[V:.*]] = exec.all_gather {{.*}} axis 0 dim 1 : tensor<8x3xf32> -> tensor<8x6xf32>
// CHECK: %[[K:.*]] = exec.keep_one %[[V]] axis 1 : tensor<8x6xf32>
// CHECK-NEXT: exec.store %[[K]] "y" global [8, 6] [B, P(sum)] : tensor<8x6xf32>
// CHECK-NEXT: %[[E:.*]] = graph.exp %[[V]] : tensor<8x6xf32>
// CHECK-NEXT: exec.store %[[E]] "z" global [8, 6] [B, B] : tensor<8x6xf32>
// CHECK-NOT: sbp.boxing
// CHECK: return

// Memory: parameters load first, inputs just before use, results are
// stored as soon as computed; a result never shares bytes with a live value; the matmul's
// operands are dead by the reduce-scatter, whose result and scratch take
// their place (placed in program order). The arena is the highest byte
// reached.
// MEM-LABEL: func.func @f()
// MEM-SAME: exec.arena_bytes = 576
// MEM: exec.load "param" "w" {{.*}} {exec.offsets = array<i64: 0>}
// MEM: exec.load "input" "x" {{.*}} {exec.offsets = array<i64: 64>}
// MEM: exec.local_slice {{.*}} {exec.offsets = array<i64: 128>}
// MEM: graph.matmul {{.*}} {exec.offsets = array<i64: 192>}
// MEM: exec.reduce_scatter {{.*}} {exec.offsets = array<i64: 0>, exec.scratch_offset = 64 : i64}
// MEM: exec.store {{.*}} "z"
// MEM-NOT: exec.offsets
// MEM: return
// Largest first, the same values and collectives' scratch take 480 bytes:
// the reduce-scatter's scratch goes where w was (dead by then), its result
// above both.
// LARGEST-LABEL: func.func @f()
// LARGEST-SAME: exec.arena_bytes = 480
// LARGEST: exec.load "param" "w" {{.*}} {exec.offsets = array<i64: 128>}
// LARGEST: graph.matmul {{.*}} {exec.offsets = array<i64: 0>}
// LARGEST-NEXT: exec.reduce_scatter {{.*}} {exec.offsets = array<i64: 256>, exec.scratch_offset = 128 : i64}
sbp.mesh @m axes ["a", "b"] shape [2, 2]
func.func @f(%x: tensor<8x4xf32> {graph.input = "x", sbp.layout = #sbp.nd<[S(0), B]>},
             %w: tensor<4x6xf32> {graph.param = "w", sbp.layout = #sbp.nd<[B, S(0)]>})
    -> (tensor<8x6xf32> {graph.output = "y"}, tensor<8x6xf32> {graph.output = "z"}) {
  %y = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %s = sbp.constraint %y mesh @m [S(0), S(1)] : tensor<8x6xf32>
  %t = sbp.constraint %s mesh @m [S(1), S(0)] : tensor<8x6xf32>
  %u = sbp.constraint %t mesh @m [P(sum), S(0)] : tensor<8x6xf32>
  %v = sbp.constraint %u mesh @m [B, B] : tensor<8x6xf32>
  %k = sbp.constraint %v mesh @m [B, P(sum)] : tensor<8x6xf32>
  %e = graph.exp %v : tensor<8x6xf32>
  return %k, %e : tensor<8x6xf32>, tensor<8x6xf32>
}

// -----

// Partial max: P(max) -> B is an all-reduce with max; B -> P(max) is free
// (every rank may hold the value); axes of one device vanish.
// CHECK-LABEL: func.func @g()
// CHECK: %[[X:.*]] = exec.load "input" "x" global [4, 8] [S(1), B] : tensor<4x4xf32>
// CHECK: %[[M:.*]] = graph.reduce_max %[[X]] dims [1] keepdims : (tensor<4x4xf32>) -> tensor<4x1xf32>
// CHECK: %[[B:.*]] = exec.all_reduce %[[M]] axis 0 "max" : tensor<4x1xf32>
// CHECK-NEXT: exec.store %[[B]] "m" global [4, 1] [B, B]
// CHECK-NEXT: exec.store %[[B]] "p" global [4, 1] [P(max), B]
// CHECK-NEXT: return
sbp.mesh @m axes ["a", "one"] shape [2, 1]
func.func @g(%x: tensor<4x8xf32> {graph.input = "x"})
    -> (tensor<4x1xf32> {graph.output = "m"}, tensor<4x1xf32> {graph.output = "p"}) {
  %p = sbp.constraint %x mesh @m [S(1), B] : tensor<4x8xf32>
  %m = graph.reduce_max %p dims [1] keepdims : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %b = sbp.constraint %m mesh @m [B, B] : tensor<4x1xf32>
  %c = sbp.constraint %b mesh @m [P(max), B] : tensor<4x1xf32>
  return %b, %c : tensor<4x1xf32>, tensor<4x1xf32>
}

// -----

// The model's arguments must say what they are.
sbp.mesh @m axes ["a"] shape [2]
// expected-error @+1 {{argument #0 of @h must be marked with exactly one of graph.param or graph.input}}
func.func @h(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Stages the programs' mesh could not hold are refused, not built one by
// one (2^63 - 1 of them hung).
sbp.mesh @m axes ["a"] shape [2]
// expected-error @+1 {{'func.func' op cannot run 9223372036854775807 pipeline stages: their mesh has more than 16777216 devices}}
func.func @many(%x: tensor<4xf32> {graph.input = "x"}) -> tensor<4xf32> attributes {sbp.stages = 9223372036854775807 : i64} {
  return %x : tensor<4xf32>
}

