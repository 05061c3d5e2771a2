// RUN: sbpc-opt %s --split-input-file --sbp-insert-boxing --verify-diagnostics

// Tests that boxing needs propagation first instead of dropping the seeds.
sbp.mesh @m axes ["x"] shape [2]
// expected-error @+1 {{'func.func' op has no layouts; run --sbp-propagate first}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sbp.constraint %x mesh @m [S(0)] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a signature needs one layout per operand (the sbp dialect's
// verifier says so before the pass runs).
sbp.mesh @m axes ["x"] shape [2]
func.func @f(%x: tensor<4xf32> {sbp.layout = #sbp.nd<[B]>}) -> tensor<4xf32> attributes {sbp.mesh = @m} {
  // expected-error @+1 {{'graph.add' op 'sbp.operand_layouts' must hold one nd-SBP like #sbp.nd<[S(0), B]> per operand (2), got [#sbp.nd<[B]>]}}
  %0 = graph.add %x, %x {sbp.operand_layouts = [#sbp.nd<[B]>], sbp.result_layouts = [#sbp.nd<[B]>]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
