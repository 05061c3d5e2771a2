// A two-layer MLP whose peak memory is at its relu (sbpc-explain-memory.test).
func.func @mlp(%x: tensor<8x4xf32> {graph.input = "x"}, %w1: tensor<4x64xf32> {graph.param = "w1"},
               %w2: tensor<64x4xf32> {graph.param = "w2"}) -> (tensor<8x4xf32> {graph.output = "y"}) {
  %h = graph.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  %r = graph.relu %h : tensor<8x64xf32>
  %y = graph.matmul %r, %w2 : (tensor<8x64xf32>, tensor<64x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
