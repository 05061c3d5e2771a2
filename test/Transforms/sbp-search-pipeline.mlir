// RUN: not sbpc-opt %s --sbp-search="stages=2 starts=zz" 2>&1 | FileCheck %s --check-prefix=NOBLOCK
// RUN: not sbpc-opt %s --sbp-search="stages=2 starts=a" 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: not sbpc-opt %s --sbp-search="stages=2 cluster=%S/../tools/Inputs/tiny-memory.json" 2>&1 | FileCheck %s --check-prefix=BALANCED
// RUN: not sbpc-opt %s --sbp-search="stages=2 cut-for-memory=false cluster=%S/../tools/Inputs/tiny-memory.json" 2>&1 | FileCheck %s --check-prefix=BYTIME
// RUN: not sbpc-opt %s --sbp-search="stages=2 starts=c cluster=%S/../tools/Inputs/tiny-memory.json" 2>&1 | FileCheck %s --check-prefix=BYHAND
// RUN: sbpc-opt %s --sbp-search="stages=2 starts=c" | FileCheck %s --check-prefix=FITS
// RUN: sed 's/"memory_bytes": 1000,/"memory_bytes": 2000,/; s/"tiny"/"small"/' %S/../tools/Inputs/tiny-memory.json > %t.json
// RUN: sbpc-opt %s --sbp-search="stages=2 cluster=%t.json" | FileCheck %s --check-prefix=FITS
// RUN: not sbpc-opt %s --sbp-search="stages=2 memory-share=0.5 cluster=%t.json" 2>&1 | FileCheck %s --check-prefix=SHARE

// --sbp-search on a pipeline checks the plan's memory on the cut
// --sbp-pipeline will make: for memory (the default), by time alone
// (cut-for-memory=false) or by hand (starts), and says which; starts that
// make no cut are refused as the pipeline pass would refuse them.
// NOBLOCK: error: 'func.func' op has no block 'zz' after its start to begin pipeline stage 1 (its forward's blocks, in order: a, b, c)
// FIRST: error: 'func.func' op cannot begin pipeline stage 1 with block 'a': it begins the forward, which would leave stage 0 nothing
// BALANCED: (the fullest of 2 pipeline stages, cut to balance memory), a device of cluster tiny has 1000 B
// BYTIME: (the fullest of 2 pipeline stages, cut by time), a device of cluster tiny has 1000 B
// BYHAND: (the fullest of 2 pipeline stages, cut by hand), a device of cluster tiny has 1000 B
// FITS: sbp.search = {algorithm = "auto"
// A plan that fits the device (2000 B) but not the share the search is
// held to (memory-share, which sbpc compile lowers where its estimates of
// the stages as cut fell short): the error names both.
// SHARE: error: no plan found fits device memory: the leanest found needs {{.*}}, a device of cluster small has 2.0 KiB (the search kept to 1000 B, as its estimates of the stages as cut fell short)
sbp.mesh @m axes ["dp"] shape [1]
func.func @j(%x: tensor<4x4xf32> {graph.input = "x"},
             %w: tensor<4x4xf32> {graph.param = "w"},
             %v: tensor<4x40xf32> {graph.param = "v"})
    -> (tensor<4x40xf32> {graph.output = "y"}) {
  %0 = graph.matmul %x, %w {graph.region = "a"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = graph.matmul %0, %w {graph.region = "b"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = graph.matmul %1, %v {graph.region = "c"} : (tensor<4x4xf32>, tensor<4x40xf32>) -> tensor<4x40xf32>
  return %2 : tensor<4x40xf32>
}
