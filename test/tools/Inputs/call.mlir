func.func @main(%x: tensor<4x6xf32> {graph.input = "x"}) -> (tensor<4x6xf32> {graph.output = "y"}) {
  // The next line is line 3.
  %0 = func.call @helper(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}
func.func private @helper(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  return %x : tensor<4x6xf32>
}
