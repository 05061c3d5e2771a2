// RUN: sbpc-opt %s --exec-fuse | FileCheck %s
// RUN: sbpc-opt %s --exec-fuse --exec-plan-memory | FileCheck %s --check-prefix=MEM

// Attention's scale, causal mask and softmax, and their gradients, become
// exec.softmax and exec.softmax_grad; the mul by the scalar does not join
// an elementwise chain. Shorter chains fuse too; a softmax over another
// axis, a mul by a tensor, and an intermediate used twice do not.
sbp.mesh @m axes ["x"] shape [1]
func.func @attention() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  %dy = exec.load "input" "dy" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  %s = exec.load "param" "s" global [] [B] : tensor<f32>
  %0 = graph.mul %x, %s : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %1 = graph.causal_mask %0 : tensor<2x4x4xf32>
  %p = graph.softmax %1 axis = 2 : tensor<2x4x4xf32>
  exec.store %p "p" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  %g = graph.softmax_grad %p, %dy axis = 2 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %gm = graph.causal_mask_grad %g : tensor<2x4x4xf32>
  %dx = graph.mul %s, %gm : (tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  exec.store %dx "dx" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  return
}

// CHECK-LABEL: func.func @attention()
// CHECK: %[[X:.*]] = exec.load "input" "x"
// CHECK: %[[DY:.*]] = exec.load "input" "dy"
// CHECK: %[[S:.*]] = exec.load "param" "s"
// CHECK-NEXT: %[[P:.*]] = exec.softmax %[[X]] scale %[[S]] : tensor<f32> causal : tensor<2x4x4xf32>
// CHECK-NEXT: exec.store %[[P]] "p"
// CHECK-NEXT: %[[DX:.*]] = exec.softmax_grad %[[P]], %[[DY]] scale %[[S]] : tensor<f32> causal : tensor<2x4x4xf32>
// CHECK-NEXT: exec.store %[[DX]] "dx"
// CHECK-NEXT: return

// MEM: exec.softmax %{{.*}} scale %{{.*}} : tensor<f32> causal {exec.offsets = array<i64: {{[0-9]+}}>} : tensor<2x4x4xf32>

func.func @partial() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4, 4] [B] : tensor<4x4xf32>
  %dy = exec.load "input" "dy" global [4, 4] [B] : tensor<4x4xf32>
  %s = exec.load "param" "s" global [] [B] : tensor<f32>
  %t = exec.load "param" "t" global [4, 4] [B] : tensor<4x4xf32>
  // Mask only; scale only.
  %0 = graph.causal_mask %x : tensor<4x4xf32>
  %1 = graph.softmax %0 axis = 1 : tensor<4x4xf32>
  exec.store %1 "masked" global [4, 4] [B] : tensor<4x4xf32>
  %2 = graph.mul %x, %s : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %3 = graph.softmax %2 axis = 1 : tensor<4x4xf32>
  exec.store %3 "scaled" global [4, 4] [B] : tensor<4x4xf32>
  // Not the last axis; a mul by a tensor; a mask whose result is stored too.
  %4 = graph.causal_mask %x : tensor<4x4xf32>
  %5 = graph.softmax %4 axis = 0 : tensor<4x4xf32>
  exec.store %5 "axis0" global [4, 4] [B] : tensor<4x4xf32>
  %6 = graph.mul %x, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %7 = graph.softmax %6 axis = 1 : tensor<4x4xf32>
  exec.store %7 "by-tensor" global [4, 4] [B] : tensor<4x4xf32>
  %8 = graph.causal_mask %x : tensor<4x4xf32>
  %9 = graph.softmax %8 axis = 1 : tensor<4x4xf32>
  exec.store %8 "kept" global [4, 4] [B] : tensor<4x4xf32>
  exec.store %9 "twice" global [4, 4] [B] : tensor<4x4xf32>
  // Gradient without the mask; a softmax_grad used twice stays.
  %10 = graph.softmax_grad %1, %dy axis = 1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %11 = graph.mul %10, %s : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  exec.store %11 "grad-scaled" global [4, 4] [B] : tensor<4x4xf32>
  %12 = graph.softmax_grad %1, %dy axis = 1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %13 = graph.causal_mask_grad %12 : tensor<4x4xf32>
  exec.store %12 "grad-kept" global [4, 4] [B] : tensor<4x4xf32>
  exec.store %13 "grad-masked" global [4, 4] [B] : tensor<4x4xf32>
  return
}

// CHECK-LABEL: func.func @partial()
// CHECK: %[[X:.*]] = exec.load "input" "x"
// CHECK: %[[S:.*]] = exec.load "param" "s"
// CHECK: %[[M:.*]] = exec.softmax %[[X]] causal : tensor<4x4xf32>
// CHECK-NEXT: exec.store %[[M]] "masked"
// CHECK-NEXT: %[[SC:.*]] = exec.softmax %[[X]] scale %[[S]] : tensor<f32> : tensor<4x4xf32>
// CHECK-NEXT: exec.store %[[SC]] "scaled"
// CHECK-NEXT: graph.causal_mask
// CHECK-NEXT: graph.softmax %{{.*}} axis = 0
// CHECK: graph.mul %[[X]], %{{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT: graph.softmax %{{.*}} axis = 1
// CHECK: %[[K:.*]] = graph.causal_mask %[[X]]
// CHECK-NEXT: graph.softmax %[[K]] axis = 1
// CHECK: %[[GS:.*]] = exec.softmax_grad %[[M]], %{{.*}} scale %[[S]] : tensor<f32> : tensor<4x4xf32>
// CHECK-NEXT: exec.store %[[GS]] "grad-scaled"
// CHECK-NEXT: %[[G:.*]] = graph.softmax_grad %[[M]]
// CHECK-NEXT: graph.causal_mask_grad %[[G]]
// CHECK-NOT: exec.softmax

// The mask's gradient fuses only after a causal exec.softmax: the fused
// gradient reads a row only up to the diagonal, which is all of it only
// where the probabilities are 0 past it.
func.func @probabilities() attributes {exec.ranks = array<i64: 0>} {
  %p = exec.load "input" "p" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  %dy = exec.load "input" "dy" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  %g = graph.softmax_grad %p, %dy axis = 2 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %gm = graph.causal_mask_grad %g : tensor<2x4x4xf32>
  exec.store %gm "dx" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  return
}

// CHECK-LABEL: func.func @probabilities()
// CHECK: graph.softmax_grad
// CHECK-NEXT: graph.causal_mask_grad
// CHECK-NOT: exec.softmax_grad
