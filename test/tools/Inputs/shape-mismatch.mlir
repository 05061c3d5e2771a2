// A model whose matmul shapes do not agree (used by sbpc-run-errors.test).
func.func @f(%x: tensor<4x6xf32> {graph.input = "x"}, %w: tensor<5x3xf32> {graph.param = "w"})
    -> (tensor<4x3xf32> {graph.output = "y"}) {
  // The next line is line 5.
  %0 = graph.matmul %x, %w : (tensor<4x6xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
