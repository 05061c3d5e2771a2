// Two inputs with one name.
func.func @f(%x: tensor<4xf32> {graph.input = "x"},
             %y: tensor<4xf32> {graph.input = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
