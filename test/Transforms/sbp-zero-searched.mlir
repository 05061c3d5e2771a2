// RUN: sbpc-opt %s --sbp-zero=stage=0 --sbp-insert-boxing | FileCheck %s --check-prefix=Z0
// RUN: sbpc-opt %s --sbp-zero=stage=1 --sbp-insert-boxing | FileCheck %s --check-prefix=Z1
// RUN: sed 's/attributes {sbp.mesh = @m, sbp.search = {algorithm = "auto"}}/attributes {sbp.mesh = @m}/' %s | sbpc-opt --sbp-zero=stage=0 --sbp-insert-boxing | FileCheck %s --check-prefix=PROPAGATED

// sbp-zero.mlir's data-parallel SGD step as a search laid it out
// (sbp.search on the function): the search split the update by rows on
// dp, having priced the updated parameter's way back to its stored
// layout. Without ZeRO the update stays as the search chose it, where a
// propagated plan's is made whole (sbp-zero.mlir): the gradient is
// reduce-scattered into rows, the velocity stored split, and the report
// counts the split update and each rank's half.
// Z0: graph.param = "w", sbp.layout = #sbp.nd<[B]>
// Z0-SAME: graph.param = "optimizer.velocity.w", sbp.layout = #sbp.nd<[S(0)]>
// Z0-SAME: gradient_bytes_per_rank = 96 : i64, optimizer_state_bytes_per_rank = 96 : i64, param_bytes_per_rank = 96 : i64, sharded_updates = 1 : i64, stage = 0
// Z0: sbp.boxing {{.*}} from [P(sum)] to [S(0)] {{{.*}}collective = "reduce-scatter"
// Z0: graph.sgd_update {{.*}}sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>]

// Stage 1 has nothing left to split, and keeps the reduce-scatter rather
// than reducing whole first.
// Z1: sharded_updates = 1 : i64, stage = 1 : i64, unsharded = []
// Z1-NOT: all-reduce
// Z1: from [P(sum)] to [S(0)] {{{.*}}collective = "reduce-scatter"

// PROPAGATED: graph.param = "optimizer.velocity.w", sbp.layout = #sbp.nd<[B]>
// PROPAGATED-SAME: sharded_updates = 0 : i64, stage = 0
// PROPAGATED: from [P(sum)] to [B] {{{.*}}collective = "all-reduce"
sbp.mesh @m axes ["dp"] shape [2]
func.func @step(%x: tensor<4x8xf32> {graph.input = "x", sbp.layout = #sbp.nd<[S(0)]>},
                %w: tensor<8x6xf32> {graph.param = "w", sbp.layout = #sbp.nd<[B]>},
                %vel: tensor<8x6xf32> {graph.param = "optimizer.velocity.w", sbp.layout = #sbp.nd<[S(0)]>})
    -> (tensor<8x6xf32> {graph.output = "w"}, tensor<8x6xf32> {graph.output = "optimizer.velocity.w"})
    attributes {sbp.mesh = @m, sbp.search = {algorithm = "auto"}} {
  %y = graph.matmul %x, %w {sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[S(0)]>]} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %y2 = graph.matmul %x, %w {sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[S(0)]>]} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %s = graph.add %y, %y2 {sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>], sbp.result_layouts = [#sbp.nd<[S(0)]>]} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %g = graph.matmul %x, %s transpose_lhs {sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>], sbp.result_layouts = [#sbp.nd<[P(sum)]>]} : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %w1, %v1 = graph.sgd_update %w, %g, %vel lr = 1.0e-01 momentum = 9.0e-01 weight_decay = 0.0 {sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>], sbp.result_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[S(0)]>]}
      : (tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>)
  return %w1, %v1 : tensor<8x6xf32>, tensor<8x6xf32>
}
