// RUN: sbpc-opt %s --sbp-spmdize | FileCheck %s

// A stage receives a value just before its first use, not where the other
// stage sends it: stage 1 computes what needs only its own input (the
// tanh) before it waits for stage 0's product. Sends never wait for their
// receivers, so the later receive cannot close a cycle of waits.

// CHECK-LABEL: func.func @f_stage0()
// CHECK: %[[A:.*]] = graph.matmul
// CHECK-NEXT: exec.send %[[A]] axis 0 to 1 tag 0
// CHECK-LABEL: func.func @f_stage1()
// CHECK: exec.load "input" "z"
// CHECK-NEXT: %[[T:.*]] = graph.tanh
// CHECK-NEXT: %[[U:.*]] = graph.tanh %[[T]]
// CHECK-NEXT: %[[R:.*]] = exec.recv axis 0 from 0 tag 0
// CHECK-NEXT: graph.add %[[R]], %[[U]]
sbp.mesh @m axes ["dp"] shape [1]
func.func @f(%x: tensor<4x4xf32> {graph.input = "x", sbp.layout = #sbp.nd<[B]>},
             %w: tensor<4x4xf32> {graph.param = "w", sbp.layout = #sbp.nd<[B]>},
             %z: tensor<4x4xf32> {graph.input = "z", sbp.layout = #sbp.nd<[B]>})
    -> (tensor<4x4xf32> {graph.output = "y"}) attributes {sbp.mesh = @m, sbp.schedule = "sequential", sbp.stages = 2 : i64} {
  %0 = graph.matmul %x, %w {sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = graph.tanh %z {sbp.operand_layouts = [#sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 1 : i64} : tensor<4x4xf32>
  %2 = graph.tanh %1 {sbp.operand_layouts = [#sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 1 : i64} : tensor<4x4xf32>
  %3 = graph.add %0, %2 {sbp.operand_layouts = [#sbp.nd<[B]>, #sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>], sbp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %3 : tensor<4x4xf32>
}
