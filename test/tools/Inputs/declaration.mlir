// A model function without a body.
func.func private @f(%x: tensor<4xf32> {graph.input = "x"}) -> tensor<4xf32>
