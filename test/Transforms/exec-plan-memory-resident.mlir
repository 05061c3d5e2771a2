// RUN: sbpc-opt %s --exec-plan-memory | FileCheck %s
// RUN: sbpc-opt %s --exec-plan-memory=placement=in-order | FileCheck %s
// RUN: sbpc-opt %s --exec-plan-memory=placement=largest-first | FileCheck %s

// A training step's update of a parameter, stored under the parameter's
// name, takes the parameter's place (both marked exec.resident), which
// then lives through the whole program: the rank's next step (--steps)
// finds it there. The optimizer's update reads each element before it
// writes it, so w and its velocity are updated in place; c is dead before
// its update is made. b is read after its update is made: its update
// needs a place of its own, and b's load reads its file each step.
sbp.mesh @m axes ["x"] shape [1]
func.func @step() attributes {exec.ranks = array<i64: 0>} {
  %w = exec.load "param" "w" global [16] [B] : tensor<16xf32>
  %v = exec.load "param" "optimizer.velocity.w" global [16] [B] : tensor<16xf32>
  %b = exec.load "param" "b" global [16] [B] : tensor<16xf32>
  %c = exec.load "param" "c" global [16] [B] : tensor<16xf32>
  %g = graph.neg %w : tensor<16xf32>
  %w1, %v1 = graph.sgd_update %w, %g, %v lr = 1.0e-01 momentum = 9.0e-01 weight_decay = 0.0 : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
  exec.store %w1 "w" global [16] [B] : tensor<16xf32>
  exec.store %v1 "optimizer.velocity.w" global [16] [B] : tensor<16xf32>
  %b1 = graph.neg %b : tensor<16xf32>
  %u = graph.add %b, %b1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  exec.store %b1 "b" global [16] [B] : tensor<16xf32>
  exec.store %u "u" global [16] [B] : tensor<16xf32>
  %c2 = graph.neg %c : tensor<16xf32>
  %c3 = graph.exp %c2 : tensor<16xf32>
  exec.store %c3 "c" global [16] [B] : tensor<16xf32>
  return
}

// CHECK: exec.load "param" "w" {{.*}}{exec.offsets = array<i64: [[W:[0-9]+]]>, exec.resident}
// CHECK-NEXT: exec.load "param" "optimizer.velocity.w" {{.*}}{exec.offsets = array<i64: [[V:[0-9]+]]>, exec.resident}
// CHECK-NEXT: exec.load "param" "b" {{.*}}{exec.offsets = array<i64: [[B:[0-9]+]]>} :
// CHECK-NEXT: exec.load "param" "c" {{.*}}{exec.offsets = array<i64: [[C:[0-9]+]]>, exec.resident}
// CHECK-NEXT: graph.neg
// CHECK-NEXT: graph.sgd_update {{.*}}{exec.offsets = array<i64: [[W]], [[V]]>}
// CHECK-NEXT: exec.store {{.*}} "w" {{.*}}{exec.resident}
// CHECK-NEXT: exec.store {{.*}} "optimizer.velocity.w" {{.*}}{exec.resident}
// CHECK-NEXT: graph.neg
// CHECK-NEXT: graph.add
// CHECK-NEXT: exec.store {{.*}} "b" global [16] [B] : tensor
// CHECK-NEXT: exec.store {{.*}} "u" global [16] [B] : tensor
// CHECK-NEXT: graph.neg
// CHECK-NEXT: graph.exp {{.*}}{exec.offsets = array<i64: [[C]]>}
// CHECK-NEXT: exec.store {{.*}} "c" {{.*}}{exec.resident}
