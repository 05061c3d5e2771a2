func.func @f(%x: tensor<4xf32> {graph.input = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @g(%x: tensor<4xf32> {graph.input = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
