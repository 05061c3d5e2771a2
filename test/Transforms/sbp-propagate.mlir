// RUN: sbpc-opt %s --split-input-file --sbp-propagate --sbp-insert-boxing | FileCheck %s

// Tests Megatron tensor parallelism from seeds: column-split then row-split
// weights leave one all-reduce of 2(p-1)/p x 8x16x4 = 768 bytes per rank.
// CHECK-LABEL: func.func @megatron
// CHECK-SAME: {graph.param = "w1", sbp.layout = #sbp.nd<[S(1)]>}
// CHECK-SAME: attributes {sbp.mesh = @m}
// CHECK: graph.matmul {{.*}}sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[S(1)]>], sbp.result_layouts = [#sbp.nd<[S(1)]>]
// CHECK: graph.gelu {{.*}}sbp.result_layouts = [#sbp.nd<[S(1)]>]
// CHECK: graph.matmul {{.*}}sbp.result_layouts = [#sbp.nd<[P(sum)]>]
// CHECK: sbp.boxing %{{.+}} mesh @m from [P(sum)] to [B] {bytes_per_rank = 768 : i64, collective = "all-reduce", mesh_axes = ["tp"], reason = "sbp.constraint at sbp-propagate.mlir:{{.+}} pins [B]"}
// CHECK-NOT: sbp.boxing
// CHECK: return
sbp.mesh @m axes ["tp"] shape [4]
func.func @megatron(%x: tensor<8x16xf32>, %w1: tensor<16x64xf32> {graph.param = "w1"},
                    %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %xb = sbp.constraint %x mesh @m [B] : tensor<8x16xf32>
  %w1s = sbp.constraint %w1 mesh @m [S(1)] : tensor<16x64xf32>
  %w2s = sbp.constraint %w2 mesh @m [S(0)] : tensor<64x16xf32>
  %h = graph.matmul %xb, %w1s : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %a = graph.gelu %h : tensor<8x64xf32>
  %y = graph.matmul %a, %w2s : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %yb = sbp.constraint %y mesh @m [B] : tensor<8x16xf32>
  return %yb : tensor<8x16xf32>
}

// -----

// Tests data parallelism: a batch-split input and free weights need no
// communication in the forward pass; the weights stay broadcast.
// CHECK-LABEL: func.func @data_parallel
// CHECK-SAME: %arg0: tensor<8x16xf32> {sbp.layout = #sbp.nd<[S(0)]>}, %arg1: tensor<16x32xf32> {sbp.layout = #sbp.nd<[B]>}, %arg2: tensor<32xf32> {sbp.layout = #sbp.nd<[B]>}
// CHECK-NOT: sbp.boxing
// CHECK: graph.relu {{.*}}sbp.result_layouts = [#sbp.nd<[S(0)]>]
// CHECK-NOT: sbp.boxing
sbp.mesh @m axes ["dp"] shape [2]
func.func @data_parallel(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %xs = sbp.constraint %x mesh @m [S(0)] : tensor<8x16xf32>
  %h = graph.matmul %xs, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %hb = graph.add %h, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = graph.relu %hb : tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// Tests both on a dp x tp mesh: the all-reduce runs on the tp axis only and
// moves the dp shard: 2(2-1)/2 x (8/2)x16x4 = 256 bytes per rank.
// CHECK-LABEL: func.func @dp_tp
// CHECK: graph.matmul {{.*}}sbp.result_layouts = [#sbp.nd<[S(0), P(sum)]>]
// CHECK: sbp.boxing %{{.+}} mesh @m from [S(0), P(sum)] to [S(0), B] {bytes_per_rank = 256 : i64, collective = "all-reduce", mesh_axes = ["tp"]
// CHECK-NOT: sbp.boxing
sbp.mesh @m axes ["dp", "tp"] shape [2, 2]
func.func @dp_tp(%x: tensor<8x16xf32>, %w1: tensor<16x64xf32>, %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %xs = sbp.constraint %x mesh @m [S(0), B] : tensor<8x16xf32>
  %w1s = sbp.constraint %w1 mesh @m [B, S(1)] : tensor<16x64xf32>
  %w2s = sbp.constraint %w2 mesh @m [B, S(0)] : tensor<64x16xf32>
  %h = graph.matmul %xs, %w1s : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %a = graph.relu %h : tensor<8x64xf32>
  %y = graph.matmul %a, %w2s : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %yb = sbp.constraint %y mesh @m [S(0), B] : tensor<8x16xf32>
  return %yb : tensor<8x16xf32>
}

// -----

// Tests that a change of layout needed by two consumers is made once, and
// that the boxing names the first consumer and the operand.
// CHECK-LABEL: func.func @shared
// CHECK: %[[B:.+]] = sbp.boxing %{{.+}} mesh @m from [S(1)] to [S(0)] {bytes_per_rank = 32 : i64, collective = "all-to-all", mesh_axes = ["x"], reason = "consumer 'graph.softmax' at sbp-propagate.mlir:{{.+}} needs [S(0)] for operand 0"}
// CHECK-NOT: sbp.boxing
// CHECK: graph.softmax %[[B]]
// CHECK: graph.log_softmax %[[B]]
sbp.mesh @m axes ["x"] shape [2]
func.func @shared(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %xs = sbp.constraint %x mesh @m [S(1)] : tensor<4x8xf32>
  %e = graph.exp %xs : tensor<4x8xf32>
  %s = graph.softmax %e axis = 1 : tensor<4x8xf32>
  %l = graph.log_softmax %e axis = 1 : tensor<4x8xf32>
  return %s, %l : tensor<4x8xf32>, tensor<4x8xf32>
}
