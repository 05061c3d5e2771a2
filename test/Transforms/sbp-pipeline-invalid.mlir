// RUN: sbpc-opt %s --split-input-file --sbp-spmdize --verify-diagnostics
// RUN: not sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline=stages=0 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline="stages=2 schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline="stages=3 starts=b" 2>&1 | FileCheck %s --check-prefix=STARTS
// RUN: not sbpc-opt %s --split-input-file --sbp-pipeline=stages=2 2>&1 | FileCheck %s --check-prefix=LAYOUTS
// RUN: not sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline="stages=2 chunks=2" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline="stages=2 schedule=interleaved" 2>&1 | FileCheck %s --check-prefix=ONECHUNK
// RUN: not sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline="stages=2 schedule=interleaved chunks=2 starts=b" 2>&1 | FileCheck %s --check-prefix=CHUNKSTARTS
// RUN: not sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline="stages=2 schedule=interleaved chunks=2" 2>&1 | FileCheck %s --check-prefix=NOMB

// The pass's options are checked before any function is cut.
// STAGES: error: sbp-pipeline: stages must be at least 1, got 0
// SCHEDULE: error: sbp-pipeline: schedule must be 1f1b, interleaved, gpipe or sequential, got 'zigzag'
// STARTS: error: sbp-pipeline: starts names 1 block for 3 stages; it takes one per stage after the first (2)
// CHUNKS: error: sbp-pipeline: only the interleaved schedule holds several chunks a stage, got 2 chunks under 1f1b
// ONECHUNK: error: sbp-pipeline: the interleaved schedule holds at least 2 chunks a stage, got 1
// CHUNKSTARTS: error: sbp-pipeline: starts names 1 block for 4 chunks; it takes one per chunk after the first (3)
// The interleaved schedule orders micro-batches: a function without them is refused.
// NOMB: error: 'func.func' op cannot be put in the interleaved schedule: it has no micro-batches to order (--sbp-micro-batches)
// A function is cut only once it has layouts.
// LAYOUTS: error: 'func.func' op has no layouts; run --sbp-propagate (or --sbp-search) and --sbp-insert-boxing first

// A function on stages whose mesh already names an axis "pp": the stages'
// axis would be ambiguous, so spmdize refuses it.
sbp.mesh @m axes ["pp"] shape [2]
// expected-error @+1 {{is placed on pipeline stages, but its mesh already has an axis named 'pp'}}
func.func @a(%x: tensor<4x4xf32> {graph.input = "x", sbp.layout = #sbp.nd<[B]>},
             %w: tensor<4x4xf32> {graph.param = "w", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4x4xf32> {graph.output = "y"}) attributes {sbp.mesh = @m, sbp.schedule = "sequential", sbp.stages = 2 : i64} {
  %0 = graph.matmul %x, %w {graph.region = "a", sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = graph.matmul %0, %w {graph.region = "b", sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// -----

// Two functions of one module on different numbers of stages: their
// programs could not share one mesh, so the second is refused.
sbp.mesh @m axes ["dp"] shape [1]
func.func @b(%x: tensor<4x4xf32> {graph.input = "x", sbp.layout = #sbp.nd<[B]>},
             %w: tensor<4x4xf32> {graph.param = "w", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4x4xf32> {graph.output = "y"}) attributes {sbp.mesh = @m, sbp.schedule = "sequential", sbp.stages = 2 : i64} {
  %0 = graph.matmul %x, %w {graph.region = "a", sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = graph.matmul %0, %w {graph.region = "b", sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}
// expected-error @+1 {{has 1 pipeline stages, another function of the module 2}}
func.func @c(%x: tensor<4x4xf32> {graph.input = "x2", sbp.layout = #sbp.nd<[B]>},
             %w: tensor<4x4xf32> {graph.param = "w2", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4x4xf32> {graph.output = "y2"}) attributes {sbp.mesh = @m} {
  %0 = graph.matmul %x, %w {sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>]} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// No layouts yet: --sbp-pipeline and --sbp-spmdize both say which passes
// come first.
sbp.mesh @m axes ["dp"] shape [1]
// expected-error @+1 {{has no layouts; run --sbp-propagate (or --sbp-search) first}}
func.func @d(%x: tensor<4x4xf32> {graph.input = "x"}, %w: tensor<4x4xf32> {graph.param = "w"})
    -> (tensor<4x4xf32> {graph.output = "y"}) {
  %0 = graph.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
