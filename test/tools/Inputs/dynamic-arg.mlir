// An input without a static shape.
func.func @f(%x: tensor<?xf32> {graph.input = "x"}) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
