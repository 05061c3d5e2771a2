// A model with layouts on a 2x2 mesh (used by sbpc-run-layouts.test).
sbp.mesh @m axes ["dp", "tp"] shape [2, 2]
func.func @f(%x: tensor<4x6xf32> {graph.input = "x"}) -> (tensor<4x6xf32> {graph.output = "y"}) {
  %two = graph.constant dense<2.0> : tensor<f32>
  %0 = sbp.constraint %x mesh @m [S(0), B] : tensor<4x6xf32>
  %1 = graph.relu %0 : tensor<4x6xf32>
  %2 = sbp.boxing %1 mesh @m from [S(0), B] to [B, S(1)] : tensor<4x6xf32>
  %3 = graph.mul %2, %two : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  return %3 : tensor<4x6xf32>
}
