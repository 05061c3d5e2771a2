// RUN: sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline=stages=2 --verify-diagnostics | FileCheck %s
// RUN: sbpc-opt %s --split-input-file --sbp-layout --sbp-pipeline=stages=2 --sbp-spmdize --verify-diagnostics | FileCheck %s --check-prefix=SPMD

// Two blocks of equal work: one per stage, each whole. The boxing that the
// second block needs (a gather, pinned) goes with it, so the first stage
// sends its value as computed and the second gathers it.

// CHECK-LABEL: func.func @f
// CHECK-SAME: sbp.stages = 2
// CHECK: graph.matmul {{.*}}sbp.stage = 0
// CHECK: graph.gelu {{.*}}sbp.stage = 0
// CHECK: graph.add {{.*}}sbp.stage = 0
// CHECK: sbp.boxing {{.*}} from [S(0)] to [B] {{.*}}sbp.stage = 1
// CHECK: graph.matmul {{.*}}sbp.stage = 1
// CHECK: graph.gelu {{.*}}sbp.stage = 1
// CHECK: sbp.boxing {{.*}}sbp.stage = 1

// The programs: one per stage, on the mesh with the stages first. Each
// loads what its ops read (B on the pipeline axis); the first sends its
// block's result right after computing it to the rank at the same
// coordinates of the second stage, which receives it and gathers it on its
// dp axis (now axis 1).
// SPMD: sbp.mesh @m axes ["pp", "dp"] shape [2, 2]
// SPMD-LABEL: func.func @f_stage0()
// SPMD-SAME: exec.ranks = array<i64: 0, 1>
// SPMD-SAME: sbp.stage = 0
// SPMD-NOT: "w1"
// SPMD: exec.load "param" "w0" global [4, 4] [B, B]
// SPMD: exec.load "param" "b0" global [4] [B, B]
// SPMD: exec.load "input" "x" global [8, 4] [B, S(0)] : tensor<4x4xf32>
// SPMD: %[[A:.*]] = graph.add
// SPMD-NEXT: exec.send %[[A]] axis 0 to 1 tag 0 : tensor<4x4xf32>
// SPMD-NEXT: return
// SPMD-LABEL: func.func @f_stage1()
// SPMD-SAME: exec.ranks = array<i64: 2, 3>
// SPMD-NEXT: exec.load "param" "w1" global [4, 4] [B, S(1)] : tensor<4x2xf32>
// SPMD-NEXT: %[[R:.*]] = exec.recv axis 0 from 0 tag 0 : tensor<4x4xf32>
// SPMD-NEXT: exec.all_gather %[[R]] axis 1 dim 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// SPMD-NEXT: graph.matmul
// SPMD-NEXT: graph.gelu
// SPMD-NEXT: exec.all_gather {{.*}} axis 1 dim 1
// SPMD-NEXT: exec.store {{.*}} "y" global [8, 4] [B, B]
sbp.mesh @m axes ["dp"] shape [2]
func.func @f(%x: tensor<8x4xf32> {graph.input = "x", sbp.layout = #sbp.nd<[S(0)]>},
             %w0: tensor<4x4xf32> {graph.param = "w0", sbp.layout = #sbp.nd<[B]>},
             %b0: tensor<4xf32> {graph.param = "b0", sbp.layout = #sbp.nd<[B]>},
             %w1: tensor<4x4xf32> {graph.param = "w1", sbp.layout = #sbp.nd<[S(1)]>})
    -> (tensor<8x4xf32> {graph.output = "y"}) {
  %0 = graph.matmul %x, %w0 {graph.region = "h.0"} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = graph.gelu %0 {graph.region = "h.0"} : tensor<8x4xf32>
  %2 = graph.add %1, %b0 {graph.region = "h.0"} : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %c = sbp.constraint %2 mesh @m [B] : tensor<8x4xf32>
  %3 = graph.matmul %c, %w1 {graph.region = "h.1"} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %4 = graph.gelu %3 {graph.region = "h.1"} : tensor<8x4xf32>
  %5 = sbp.constraint %4 mesh @m [B] : tensor<8x4xf32>
  return %5 : tensor<8x4xf32>
}

// -----

// A backward op goes where the forward values it reads all are (a value
// read by the next stage is there too), preferring the stage its backward
// operands come from; the seed of the backward pass (a constant) goes to
// its reader's stage.

// CHECK-LABEL: func.func @g
// CHECK: %[[H:.*]] = graph.tanh {{.*}}sbp.stage = 0
// CHECK: %[[Y:.*]] = graph.tanh {{.*}}sbp.stage = 1
// CHECK: graph.constant {{.*}}sbp.stage = 1
// CHECK: graph.mul %[[Y]], {{.*}}sbp.stage = 1
// CHECK: graph.mul %{{.*}}, %[[H]] {{.*}}sbp.stage = 1
// CHECK: graph.mul %{{.*}}, %arg0 {{.*}}sbp.stage = 0
// CHECK: graph.neg {{.*}}sbp.stage = 0

// Sends and receives meet in the function's order: the forward value
// goes up, the gradient comes back down.
// SPMD-LABEL: func.func @g_stage0()
// SPMD: exec.send %{{.*}} axis 0 to 1 tag 0
// SPMD-NEXT: exec.recv axis 0 from 1 tag 1
// SPMD: graph.neg
// SPMD: exec.store {{.*}} "dx"
// SPMD-LABEL: func.func @g_stage1()
// SPMD-NOT: exec.load
// SPMD: exec.recv axis 0 from 0 tag 0
// SPMD: exec.store {{.*}} "y"
// SPMD: exec.send %{{.*}} axis 0 to 0 tag 1
sbp.mesh @m axes ["dp"] shape [1]
func.func @g(%x: tensor<4xf32> {graph.param = "x", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4xf32> {graph.output = "y"}, tensor<4xf32> {graph.output = "dx"}) {
  %h = graph.tanh %x : tensor<4xf32>
  %y = graph.tanh %h : tensor<4xf32>
  %seed = graph.constant {graph.backward} dense<1.0> : tensor<4xf32>
  %dy = graph.mul %y, %seed {graph.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dh = graph.mul %dy, %h {graph.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dxx = graph.mul %dh, %x {graph.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dx = graph.neg %dxx {graph.backward} : tensor<4xf32>
  return %y, %dx : tensor<4xf32>, tensor<4xf32>
}

// -----

// More stages than parts to place: refused, not left idle. A block goes
// whole; a forward of inputs alone has nothing to cut.
sbp.mesh @m axes ["dp"] shape [1]
// expected-error @+1 {{cannot be cut into 2 pipeline stages: its forward has 1 part to place (whole blocks, and ops outside blocks that read parameters); use at most 1 stage}}
func.func @h(%x: tensor<4xf32> {graph.param = "x", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4xf32> {graph.output = "y"}) {
  %0 = graph.tanh %x {graph.region = "h.0"} : tensor<4xf32>
  %1 = graph.exp %0 {graph.region = "h.0"} : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

sbp.mesh @m axes ["dp"] shape [1]
// expected-error @+1 {{cannot be cut into 2 pipeline stages: no forward op reads a parameter (only those, and whole blocks, are cut)}}
func.func @i(%x: tensor<4xf32> {graph.input = "x", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4xf32> {graph.output = "y"}) {
  %0 = graph.tanh %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

