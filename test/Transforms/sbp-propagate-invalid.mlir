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

// -----

// Tests that indices cannot be partial sums.
sbp.mesh @m axes ["x"] shape [2]
// expected-error @+1 {{argument #0 layout [P(sum)]: a partial layout needs a floating-point tensor}}
func.func @f(%t: tensor<4xi64> {sbp.layout = #sbp.nd<[P(sum)]>}) -> tensor<4xi64> {
  return %t : tensor<4xi64>
}

// -----

// Tests that a seed needs a tensor.
sbp.mesh @m axes ["x"] shape [2]
// expected-error @+1 {{argument #0 layout [B]: a layout needs a statically shaped tensor, not i32}}
func.func @f(%i: i32 {sbp.layout = #sbp.nd<[B]>}) -> i32 {
  return %i : i32
}

// -----

// Tests that a seed is a layout (the dialect's verifier says so first).
sbp.mesh @m axes ["x"] shape [2]
// expected-error @+1 {{argument #0 'sbp.layout' must be an nd-SBP like #sbp.nd<[S(0), B]>, got "S(0)"}}
func.func @f(%x: tensor<4xf32> {sbp.layout = "S(0)"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that an existing boxing must start from its operand's layout.
sbp.mesh @m axes ["x"] shape [2]
func.func @f(%x: tensor<4x4xf32> {sbp.layout = #sbp.nd<[S(0)]>}) -> tensor<4x4xf32> {
  // expected-error @+1 {{'sbp.boxing' op boxes from [P(sum)] but its operand is laid out [S(0)]}}
  %0 = sbp.boxing %x mesh @m from [P(sum)] to [B] : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
