// An elementwise chain whose inputs broadcast every way: a column [4, 1],
// a batch of rows [2, 1, 8], a scalar [1], and a full tensor.
func.func @chain(%x: tensor<2x4x8xf32> {graph.input = "x"}, %a: tensor<4x1xf32> {graph.input = "a"},
                 %c: tensor<2x1x8xf32> {graph.input = "c"}, %s: tensor<1xf32> {graph.input = "s"})
    -> (tensor<2x4x8xf32> {graph.output = "y"}) {
  %0 = graph.mul %x, %a : (tensor<2x4x8xf32>, tensor<4x1xf32>) -> tensor<2x4x8xf32>
  %1 = graph.add %0, %c : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  %2 = graph.sub %1, %s : (tensor<2x4x8xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  %3 = graph.tanh %2 : tensor<2x4x8xf32>
  %4 = graph.gelu_grad %3, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %4 : tensor<2x4x8xf32>
}
