sbp.mesh @m axes ["dp"] shape [2]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = graph.relu %x : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
