// RUN: sbpc-opt %s --sbp-search=algorithm=exact | FileCheck %s
// RUN: sbpc-opt %s --sbp-search=algorithm=drec | FileCheck %s --check-prefix=DREC
// RUN: not sbpc-opt %s --sbp-search=algorithm=greedy 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not sbpc-opt %s --sbp-search=stages=0 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not sbpc-opt %s --sbp-search="stages=2 schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=SCHEDULE

// Tests that --sbp-search lays out a data-parallel MLP layer without
// boxing (the seeded input stays split, the weight is replicated), records
// what it did on the function and each op's runner-up, and refuses an
// unknown algorithm.
sbp.mesh @m axes ["x"] shape [2]
// CHECK-LABEL: func.func @f
// CHECK-SAME: %arg1: tensor<8x4xf32> {sbp.layout = #sbp.nd<[B]>}
// CHECK-SAME: sbp.mesh = @m
// CHECK-SAME: sbp.search = {algorithm = "exact", candidates_evaluated = {{[0-9]+}} : i64, memory_bytes_per_rank = {{.*}}, plan_seconds = {{.*}}, search_seconds = {{.*}}}
// CHECK: graph.matmul %arg0, %arg1 {sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[S(0)]>], sbp.runner_up = {operands = [{{.*}}], plan_seconds = {{.*}}, results = [{{.*}}]}}
// CHECK: graph.relu %0 {sbp.operand_layouts = [#sbp.nd<[S(0)]>], sbp.result_layouts = [#sbp.nd<[S(0)]>]
// DREC: sbp.search = {algorithm = "drec"
// UNKNOWN: error: --sbp-search: unknown algorithm 'greedy' (auto, drec or exact)
// STAGES: error: sbp-search: stages must be at least 1, got 0
// SCHEDULE: error: sbp-search: schedule must be 1f1b, interleaved, gpipe or sequential, got 'zigzag'
// RUN: not sbpc-opt %s --sbp-search=memory-share=1.5 2>&1 | FileCheck %s --check-prefix=SHARE
// SHARE: error: sbp-search: memory-share must be in (0, 1], got 1.5
// RUN: not sbpc-opt %s --sbp-search=zero=7 2>&1 | FileCheck %s --check-prefix=STAGE
// STAGE: error: --sbp-search: ZeRO stage must be 0, 1, 2 or 3, got 7
func.func @f(%x: tensor<8x8xf32> {sbp.layout = #sbp.nd<[S(0)]>}, %w: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = graph.matmul %x, %w : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = graph.relu %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
