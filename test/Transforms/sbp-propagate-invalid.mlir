// RUN: sbpc-opt %s --split-input-file --sbp-propagate --verify-diagnostics

// Tests that propagation needs a mesh.
// expected-error @+1 {{expected exactly one sbp.mesh in the module, found 0}}
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = graph.relu %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// Tests that an op without SBP signatures is named.
sbp.mesh @m axes ["x"] shape [2]
func.func private @g(tensor<4xf32>) -> tensor<4xf32>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op has no SBP signature on mesh @m (operands laid out ?)}}
  %0 = func.call @g(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a seed on an argument must fit the tensor.
sbp.mesh @m axes ["tp"] shape [4]
// expected-error @+1 {{argument #0 layout [S(0)]: dimension 0 of size 6 is not divisible by mesh axis 'tp' of size 4}}
func.func @f(%x: tensor<6x4xf32> {sbp.layout = #sbp.nd<[S(0)]>}) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}
