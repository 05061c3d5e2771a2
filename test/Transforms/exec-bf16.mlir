// RUN: sbpc-opt %s --exec-bf16 --split-input-file | FileCheck %s
// RUN: sbpc-opt %s --exec-bf16 --exec-fuse --exec-plan-memory=placement=in-order --split-input-file | FileCheck %s --check-prefix=PLAN

// A training step: the forward and backward depend on the input and become
// bf16; the weight stays f32 for adamw with one bf16 copy for the matmuls;
// the gradient is reduced in bf16 and converted once for the update; the
// step counter (no input behind it) stays f32 all the way to its store.
sbp.mesh @m axes ["dp"] shape [2]
func.func @step() attributes {exec.ranks = array<i64: 0, 1>} {
  %x = exec.load "input" "x" global [4, 8] [S(0)] : tensor<2x8xf32>
  %w = exec.load "param" "w" global [8, 4] [B] : tensor<8x4xf32>
  %m = exec.load "param" "optimizer.m.w" global [8, 4] [B] : tensor<8x4xf32>
  %v = exec.load "param" "optimizer.v.w" global [8, 4] [B] : tensor<8x4xf32>
  %t = exec.load "param" "optimizer.step" global [] [B] : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %t1 = graph.add %t, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %h = graph.gelu %y : tensor<2x4xf32>
  %dw = graph.matmul %x, %h transpose_lhs : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
  %dx = graph.matmul %h, %w transpose_rhs : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  %g = exec.all_reduce %dw axis 0 "sum" : tensor<8x4xf32>
  %nw, %nm, %nv = graph.adamw_update %w, %g, %m, %v, %t lr = 1.0e-3 beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>)
      -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
  exec.store %dx "dx" global [4, 8] [S(0)] : tensor<2x8xf32>
  exec.store %nw "w" global [8, 4] [B] : tensor<8x4xf32>
  exec.store %nm "optimizer.m.w" global [8, 4] [B] : tensor<8x4xf32>
  exec.store %nv "optimizer.v.w" global [8, 4] [B] : tensor<8x4xf32>
  exec.store %t1 "optimizer.step" global [] [B] : tensor<f32>
  return
}

// CHECK-LABEL: func.func @step()
// CHECK:      %[[X:.*]] = exec.load "input" "x" {{.*}} : tensor<2x8xbf16>
// CHECK-NEXT: %[[W:.*]] = exec.load "param" "w" {{.*}} : tensor<8x4xf32>
// CHECK-NEXT: %[[WB:.*]] = exec.convert %[[W]] : tensor<8x4xf32> to tensor<8x4xbf16>
// CHECK:      %[[T:.*]] = exec.load "param" "optimizer.step" {{.*}} : tensor<f32>
// CHECK:      %[[T1:.*]] = graph.add %[[T]], %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[Y:.*]] = graph.matmul %[[X]], %[[WB]] : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[H:.*]] = graph.gelu %[[Y]] : tensor<2x4xbf16>
// CHECK-NEXT: %[[DW:.*]] = graph.matmul %[[X]], %[[H]] transpose_lhs {{.*}} -> tensor<8x4xbf16>
// CHECK-NEXT: %[[DX:.*]] = graph.matmul %[[H]], %[[WB]] transpose_rhs {{.*}} -> tensor<2x8xbf16>
// CHECK-NEXT: %[[G:.*]] = exec.all_reduce %[[DW]] axis 0 "sum" : tensor<8x4xbf16>
// CHECK-NEXT: %[[GF:.*]] = exec.convert %[[G]] : tensor<8x4xbf16> to tensor<8x4xf32>
// CHECK-NEXT: graph.adamw_update %[[W]], %[[GF]], {{.*}} -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK-NEXT: exec.store %[[DX]] "dx" {{.*}} : tensor<2x8xbf16>
// CHECK:      exec.store %[[T1]] "optimizer.step" {{.*}} : tensor<f32>

// The weight's bf16 copy takes 64 bytes of the arena, the f32 weight 128
// (placed in program order; the weight and its states first, as their
// places, which their updates take, live through the whole step).
// PLAN-LABEL: func.func @step()
// PLAN:      exec.load "param" "w" {{.*}}exec.offsets = array<i64: 64>, exec.resident} : tensor<8x4xf32>
// PLAN-NEXT: exec.convert {{.*}}exec.offsets = array<i64: 448>{{.*}} to tensor<8x4xbf16>
// PLAN-NEXT: exec.load "param" "optimizer.m.w" {{.*}}exec.offsets = array<i64: 192>, exec.resident}
// PLAN-NEXT: exec.load "param" "optimizer.v.w" {{.*}}exec.offsets = array<i64: 320>, exec.resident}
// PLAN-NEXT: exec.load "param" "optimizer.step" {{.*}}exec.offsets = array<i64: 512>} :

// -----

// Inference: a parameter only the forward uses is loaded as bf16; a
// constant keeps its f32 attribute and is converted where bf16 needs it.
sbp.mesh @m axes ["x"] shape [1]
func.func @forward() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [2, 8] [B] : tensor<2x8xf32>
  %w = exec.load "param" "w" global [8, 4] [B] : tensor<8x4xf32>
  %s = graph.constant dense<0.5> : tensor<f32>
  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %z = graph.mul %y, %s : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  exec.store %z "z" global [2, 4] [B] : tensor<2x4xf32>
  return
}

// CHECK-LABEL: func.func @forward()
// CHECK:      exec.load "param" "w" {{.*}} : tensor<8x4xbf16>
// CHECK-NEXT: %[[S:.*]] = graph.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[SB:.*]] = exec.convert %[[S]] : tensor<f32> to tensor<bf16>
// CHECK:      graph.mul %{{.*}}, %[[SB]] : (tensor<2x4xbf16>, tensor<bf16>) -> tensor<2x4xbf16>
// CHECK-NOT:  exec.convert
// CHECK:      exec.store {{.*}} : tensor<2x4xbf16>

// -----

// A sum over micro-batches (graph.accumulate) stays f32: each micro-batch's
// bf16 gradient is widened once and added to the f32 total; the all-reduce
// after it moves bf16 again, and the update reads the f32 copy of that.
sbp.mesh @m axes ["x"] shape [2]
func.func @accumulate() attributes {exec.ranks = array<i64: 0, 1>} {
  %x = exec.load "input" "x" global [4, 8] [S(0)] : tensor<2x8xf32>
  %w = exec.load "param" "w" global [8, 8] [B] : tensor<8x8xf32>
  %v = exec.load "param" "w.velocity" global [8, 8] [B] : tensor<8x8xf32>
  %g0 = graph.matmul %x, %x transpose_lhs : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %g1 = graph.exp %g0 : tensor<8x8xf32>
  %sum = graph.add %g0, %g1 {graph.accumulate} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = exec.all_reduce %sum axis 0 "sum" : tensor<8x8xf32>
  %nw, %nv = graph.sgd_update %w, %r, %v lr = 1.0e-1 momentum = 0.9 weight_decay = 0.0
      : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
  exec.store %nw "w" global [8, 8] [B] : tensor<8x8xf32>
  exec.store %nv "w.velocity" global [8, 8] [B] : tensor<8x8xf32>
  return
}

// CHECK-LABEL: func.func @accumulate()
// CHECK:      %[[G0:.*]] = graph.matmul {{.*}} -> tensor<8x8xbf16>
// CHECK-NEXT: %[[W0:.*]] = exec.convert %[[G0]] : tensor<8x8xbf16> to tensor<8x8xf32>
// CHECK-NEXT: %[[G1:.*]] = graph.exp %[[G0]] : tensor<8x8xbf16>
// CHECK-NEXT: %[[W1:.*]] = exec.convert %[[G1]] : tensor<8x8xbf16> to tensor<8x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = graph.add %[[W0]], %[[W1]] {graph.accumulate} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[SB:.*]] = exec.convert %[[SUM]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: %[[R:.*]] = exec.all_reduce %[[SB]] axis 0 "sum" : tensor<8x8xbf16>
// CHECK-NEXT: %[[RF:.*]] = exec.convert %[[R]] : tensor<8x8xbf16> to tensor<8x8xf32>
// CHECK-NEXT: graph.sgd_update %{{.*}}, %[[RF]], %{{.*}}

// -----

// Both sides of a pipeline boundary say bf16, whatever the sender held.
sbp.mesh @m axes ["pp"] shape [2]
func.func @first() attributes {exec.ranks = array<i64: 0>} {
  %w = exec.load "param" "w" global [8, 4] [B] : tensor<8x4xf32>
  exec.send %w axis 0 to 1 tag 0 : tensor<8x4xf32>
  return
}
func.func @second() attributes {exec.ranks = array<i64: 1>} {
  %w = exec.recv axis 0 from 0 tag 0 : tensor<8x4xf32>
  exec.store %w "w" global [8, 4] [B] : tensor<8x4xf32>
  return
}

// CHECK-LABEL: func.func @first()
// CHECK: exec.send {{.*}} : tensor<8x4xbf16>
// CHECK-LABEL: func.func @second()
// CHECK: exec.recv axis 0 from 0 tag 0 : tensor<8x4xbf16>

// -----

// A sum of gradients the other stage's update reads goes, and arrives, in
// f32; a message between programs without stages stays bf16 (above).
sbp.mesh @m axes ["pp"] shape [2]
func.func @summing() attributes {exec.ranks = array<i64: 0>, sbp.stage = 0 : i64} {
  %a = exec.load "input" "a" global [4] [B] : tensor<4xf32>
  %b = exec.load "input" "b" global [4] [B] : tensor<4xf32>
  %s = graph.add %a, %b {graph.accumulate} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  exec.send %s axis 0 to 1 tag 3 : tensor<4xf32>
  %t = graph.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  exec.send %t axis 0 to 1 tag 4 : tensor<4xf32>
  return
}
func.func @updating() attributes {exec.ranks = array<i64: 1>, sbp.stage = 1 : i64} {
  %g = exec.recv axis 0 from 0 tag 3 : tensor<4xf32>
  %h = exec.recv axis 0 from 0 tag 4 : tensor<4xf32>
  exec.store %g "g" global [4] [B] : tensor<4xf32>
  exec.store %h "h" global [4] [B] : tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @summing()
// CHECK: %[[S:.*]] = graph.add {{.*}} -> tensor<4xf32>
// CHECK-NEXT: exec.send %[[S]] axis 0 to 1 tag 3 : tensor<4xf32>
// CHECK: exec.send {{.*}} tag 4 : tensor<4xbf16>
// CHECK-LABEL: func.func @updating()
// CHECK: exec.recv axis 0 from 0 tag 3 : tensor<4xf32>
// CHECK: exec.recv axis 0 from 0 tag 4 : tensor<4xbf16>
