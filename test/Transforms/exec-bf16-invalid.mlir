// RUN: sbpc-opt %s --exec-bf16 --verify-diagnostics

// Fusion first is an error: the fused bodies' types would have to change too.
sbp.mesh @m axes ["x"] shape [1]
func.func @fused() attributes {exec.ranks = array<i64: 0>} {
  %x = exec.load "input" "x" global [4] [B] : tensor<4xf32>
  // expected-error @+1 {{is already fused: run --exec-bf16 before --exec-fuse}}
  %y = exec.fused(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %0 = graph.neg %a : tensor<4xf32>
    %1 = graph.exp %0 : tensor<4xf32>
    exec.yield %1 : tensor<4xf32>
  }
  exec.store %y "y" global [4] [B] : tensor<4xf32>
  return
}
