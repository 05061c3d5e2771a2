// A model with an argument that is neither a parameter nor an input.
func.func @f(
    %x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
