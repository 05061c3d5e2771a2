// A model whose one op needs far more memory than any test machine has
// (4e12 bytes): the evaluator refuses it at the op instead of aborting.
func.func @f(%x: tensor<1xf32> {graph.input = "x"}) -> (tensor<100000x100000x100xf32> {graph.output = "y"}) {
  // The next line is line 5.
  %0 = graph.broadcast %x : (tensor<1xf32>) -> tensor<100000x100000x100xf32>
  return %0 : tensor<100000x100000x100xf32>
}
