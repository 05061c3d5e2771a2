// A constant held as a resource blob rather than dense elements.
func.func @f(%x: tensor<4x6xf32> {graph.input = "x"}) -> (tensor<4x6xf32> {graph.output = "y"}) {
  // The next line is line 4.
  %c = graph.constant dense_resource<blob> : tensor<f32>
  %0 = graph.mul %x, %c : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F"
    }
  }
#-}
