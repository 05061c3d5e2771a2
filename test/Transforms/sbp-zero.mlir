// RUN: sbpc-opt %s --sbp-propagate --sbp-zero=stage=0 --sbp-insert-boxing | FileCheck %s --check-prefix=Z0
// RUN: sbpc-opt %s --sbp-propagate --sbp-zero=stage=1 --sbp-insert-boxing | FileCheck %s --check-prefix=Z1
// RUN: sbpc-opt %s --sbp-propagate --sbp-zero=stage=2 --sbp-insert-boxing | FileCheck %s --check-prefix=Z2
// RUN: sbpc-opt %s --sbp-propagate --sbp-zero=stage=3 --sbp-insert-boxing | FileCheck %s --check-prefix=Z3
// RUN: not sbpc-opt %s --sbp-propagate --sbp-zero=stage=4 2>&1 | FileCheck %s --check-prefix=BAD

// A data-parallel SGD step (x split by rows on dp): the weight's gradient
// comes out P(sum). Parameter, gradient and velocity: 8x6 f32, 192 bytes.

// Stage 0, plain data parallelism: the gradient is all-reduced, the update
// and its state are whole on every rank (propagation alone would split the
// update, not seeing that the next step needs the whole parameter).
// Z0: graph.param = "w", sbp.layout = #sbp.nd<[B]>
// Z0-SAME: graph.param = "optimizer.velocity.w", sbp.layout = #sbp.nd<[B]>
// Z0-SAME: sbp.zero = {axes = ["dp"], gradient_bytes_per_rank = 192 : i64, optimizer_state_bytes_per_rank = 192 : i64, param_bytes_per_rank = 192 : i64, sharded_updates = 0 : i64, stage = 0 : i64, unsharded = [], updates = 1 : i64}
// Z0: sbp.boxing {{.*}} from [P(sum)] to [B] {{{.*}}collective = "all-reduce"
// Z0-NOT: sbp.boxing
// Z0: graph.sgd_update {{.*}}sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>, #sbp.nd<[B]>]

// Stage 1: the velocity is stored split; the gradient is still reduced
// whole, then each rank keeps its rows.
// Z1: graph.param = "w", sbp.layout = #sbp.nd<[B]>
// Z1-SAME: graph.param = "optimizer.velocity.w", sbp.layout = #sbp.nd<[S(0)]>
// Z1-SAME: gradient_bytes_per_rank = 192 : i64, optimizer_state_bytes_per_rank = 96 : i64, param_bytes_per_rank = 192 : i64, sharded_updates = 1 : i64, stage = 1
// Z1: %[[R:.*]] = sbp.boxing {{.*}} from [P(sum)] to [B] {{{.*}}collective = "all-reduce"
// Z1-NEXT: %[[G:.*]] = sbp.boxing %[[R]] {{.*}} from [B] to [S(0)] {{{.*}}collective = "local-slice"
// Z1: %[[W:.*]] = sbp.boxing %arg1 {{.*}} from [B] to [S(0)] {{{.*}}collective = "local-slice"
// Z1: graph.sgd_update %[[W]], %[[G]], %arg2 {{.*}}sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>], sbp.result_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>]

// Stage 2: the gradient is reduced straight into rows, as soon as it is
// computed.
// Z2: gradient_bytes_per_rank = 96 : i64, optimizer_state_bytes_per_rank = 96 : i64, param_bytes_per_rank = 192 : i64, sharded_updates = 1 : i64, stage = 2
// Z2: %[[P:.*]] = graph.matmul %arg0, {{.*}} transpose_lhs
// Z2-NEXT: %[[G:.*]] = sbp.boxing %[[P]] {{.*}} from [P(sum)] to [S(0)] {{{.*}}collective = "reduce-scatter"
// Z2: graph.sgd_update {{.*}}, %[[G]], %arg2

// Stage 3: the parameter is stored split too and gathered before each of
// its two uses separately.
// Z3: graph.param = "w", sbp.gather_per_use, sbp.layout = #sbp.nd<[S(0)]>
// Z3-SAME: gradient_bytes_per_rank = 96 : i64, optimizer_state_bytes_per_rank = 96 : i64, param_bytes_per_rank = 96 : i64, sharded_updates = 1 : i64, stage = 3
// Z3: %[[A:.*]] = sbp.boxing %arg1 {{.*}} from [S(0)] to [B] {{{.*}}collective = "all-gather"
// Z3-NEXT: graph.matmul %arg0, %[[A]]
// Z3-NEXT: %[[B:.*]] = sbp.boxing %arg1 {{.*}} from [S(0)] to [B] {{{.*}}collective = "all-gather"
// Z3-NEXT: graph.matmul %arg0, %[[B]]
// Z3: graph.sgd_update %arg1, {{.*}}, %arg2

// BAD: ZeRO stage must be 0, 1, 2 or 3, got 4
sbp.mesh @m axes ["dp"] shape [2]
func.func @step(%x: tensor<4x8xf32> {graph.input = "x", sbp.layout = #sbp.nd<[S(0)]>},
                %w: tensor<8x6xf32> {graph.param = "w"},
                %vel: tensor<8x6xf32> {graph.param = "optimizer.velocity.w"})
    -> (tensor<8x6xf32> {graph.output = "w"}, tensor<8x6xf32> {graph.output = "optimizer.velocity.w"}) {
  %y = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %y2 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %s = graph.add %y, %y2 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %g = graph.matmul %x, %s transpose_lhs : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %w1, %v1 = graph.sgd_update %w, %g, %vel lr = 1.0e-01 momentum = 9.0e-01 weight_decay = 0.0
      : (tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>)
  return %w1, %v1 : tensor<8x6xf32>, tensor<8x6xf32>
}
