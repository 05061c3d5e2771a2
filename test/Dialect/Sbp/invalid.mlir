// RUN: sbpc-opt %s --split-input-file --verify-diagnostics

// Tests that a mesh has as many sizes as axis names.
// expected-error @+1 {{'sbp.mesh' op has 2 axis names but 1 sizes}}
sbp.mesh @m axes ["dp", "tp"] shape [2]

// -----

// Tests that mesh axis names are unique.
// expected-error @+1 {{'sbp.mesh' op axis 'dp' is named twice}}
sbp.mesh @m axes ["dp", "dp"] shape [2, 2]

// -----

// Tests that axis names are words (they reach generated programs): a
// newline is shown escaped, on the diagnostic's one line.
// expected-error @+1 {{'sbp.mesh' op axis name 'd\0Ap' must be letters, digits and '_'}}
sbp.mesh @m axes ["d\0Ap", "tp"] shape [2, 2]

// -----

// Tests that a mesh has at most four axes.
// expected-error @+1 {{'sbp.mesh' op has 5 axes, more than the 4 sbpc lays out}}
sbp.mesh @m axes ["a", "b", "c", "d", "e"] shape [1, 1, 1, 1, 1]

// -----

// Tests that mesh axes have at least one device.
// expected-error @+1 {{'sbp.mesh' op axis 'tp' has size 0, expected at least 1}}
sbp.mesh @m axes ["dp", "tp"] shape [2, 0]

// -----

// Tests that a mesh has an axis.
// expected-error @+1 {{'sbp.mesh' op needs at least one axis}}
sbp.mesh @m axes [] shape []

// -----

// Tests that axis names are non-empty.
// expected-error @+1 {{'sbp.mesh' op axis names must be non-empty}}
sbp.mesh @m axes [""] shape [2]

// -----

// Tests that a mesh's device count cannot overflow.
// expected-error @+1 {{'sbp.mesh' op has more than 16777216 devices}}
sbp.mesh @m axes ["a", "b"] shape [4294967296, 4294967296]

// -----

// Tests that a layout has one entry per mesh axis.
sbp.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @arity(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'sbp.constraint' op layout [S(0)] on mesh @m: 1 entry for a mesh of 2 axes}}
  %0 = sbp.constraint %x mesh @m [S(0)] : tensor<8x64xf32>
  return
}

// -----

// Tests that split dimensions are in range.
sbp.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @split_range(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'sbp.constraint' op layout [S(0), S(2)] on mesh @m: S(2) on mesh axis 'tp' splits dimension 2 of a rank-2 tensor}}
  %0 = sbp.constraint %x mesh @m [S(0), S(2)] : tensor<8x64xf32>
  return
}

// -----

// Tests that a split dimension must divide evenly.
sbp.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @divisible(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{'sbp.constraint' op layout [B, S(1)] on mesh @m: dimension 1 of size 6 is not divisible by mesh axis 'tp' of size 4}}
  %0 = sbp.constraint %x mesh @m [B, S(1)] : tensor<8x6xf32>
  return
}

// -----

// Tests that two axes splitting one dimension need their product to divide it.
sbp.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @divisible_product(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'sbp.boxing' op source layout [S(0), S(0)] on mesh @m: dimension 0 of size 4 is not divisible by mesh axis 'dp' x 'tp' of size 8}}
  %0 = sbp.boxing %x mesh @m from [S(0), S(0)] to [B, B] : tensor<4x6xf32>
  return
}

// -----

// Tests that the target layout of a boxing is checked too.
sbp.mesh @m axes ["x"] shape [3]
func.func @boxing_target(%x: tensor<6x4xf32>) {
  // expected-error @+1 {{'sbp.boxing' op target layout [S(1)] on mesh @m: dimension 1 of size 4 is not divisible by mesh axis 'x' of size 3}}
  %0 = sbp.boxing %x mesh @m from [S(0)] to [S(1)] : tensor<6x4xf32>
  return
}

// -----

// Tests that the mesh must exist.
func.func @no_mesh(%x: tensor<8xf32>) {
  // expected-error @+1 {{'sbp.constraint' op '@nowhere' does not name an sbp.mesh}}
  %0 = sbp.constraint %x mesh @nowhere [B] : tensor<8xf32>
  return
}

// -----

// Tests that a split dimension is non-negative.
sbp.mesh @m axes ["x"] shape [2]
func.func @negative_split(%x: tensor<8xf32>) {
  // expected-error @+1 {{split dimension must be non-negative, got -1}}
  %0 = sbp.constraint %x mesh @m [S(-1)] : tensor<8xf32>
  return
}

// -----

// Tests that an unknown SBP is rejected.
sbp.mesh @m axes ["x"] shape [2]
func.func @unknown_sbp(%x: tensor<8xf32>) {
  // expected-error @+1 {{unknown SBP 'Q', expected B, S(dim) or P(sum|max)}}
  %0 = sbp.constraint %x mesh @m [Q] : tensor<8xf32>
  return
}

// -----

// Tests that an unknown partial reduction is rejected.
sbp.mesh @m axes ["x"] shape [2]
func.func @unknown_reduce(%x: tensor<8xf32>) {
  // expected-error @+1 {{unknown partial reduction 'min', expected 'sum' or 'max'}}
  %0 = sbp.constraint %x mesh @m [P(min)] : tensor<8xf32>
  return
}

// -----

// Tests that an nd-SBP is not empty.
sbp.mesh @m axes ["x"] shape [2]
func.func @empty_nd(%x: tensor<8xf32>) {
  // expected-error @+1 {{an nd-SBP needs one entry per mesh axis, got none}}
  %0 = sbp.constraint %x mesh @m [] : tensor<8xf32>
  return
}

// -----

// Tests that a layout op keeps the type.
sbp.mesh @m axes ["x"] shape [2]
func.func @type_change(%x: tensor<8xf32>) {
  // expected-error @+1 {{'sbp.boxing' op failed to verify that all of {input, result} have same type}}
  %0 = "sbp.boxing"(%x) <{mesh = @m, from = #sbp.nd<[B]>, to = #sbp.nd<[S(0)]>}> : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that a layout may not mix partial sums and partial maxima.
sbp.mesh @m axes ["a", "b"] shape [2, 2]
func.func @mixed_partials(%x: tensor<8xf32>) {
  // expected-error @+1 {{'sbp.constraint' op layout [P(sum), P(max)] on mesh @m: P(sum) and P(max) cannot be mixed}}
  %0 = sbp.constraint %x mesh @m [P(sum), P(max)] : tensor<8xf32>
  return
}

// -----

// Tests that integer tensors cannot be partial.
sbp.mesh @m axes ["x"] shape [2]
func.func @partial_indices(%t: tensor<8xi64>) {
  // expected-error @+1 {{'sbp.constraint' op layout [P(max)] on mesh @m: a partial layout needs a floating-point tensor}}
  %0 = sbp.constraint %t mesh @m [P(max)] : tensor<8xi64>
  return
}

// -----

// Tests that an argument's layout seed is an nd-SBP (a string was ignored).
// expected-error @+1 {{'func.func' op argument #0 'sbp.layout' must be an nd-SBP like #sbp.nd<[S(0), B]>, got "S(0)"}}
func.func @string_seed(%x: tensor<4xf32> {sbp.layout = "S(0)"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that an op's layouts are one nd-SBP per operand and result: passes
// read them as such (an integer among them crashed --sbp-spmdize and
// --sbp-pipeline).
sbp.mesh @m axes ["dp"] shape [2]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {sbp.mesh = @m} {
  // expected-error @+1 {{'graph.relu' op 'sbp.result_layouts' must hold one nd-SBP like #sbp.nd<[S(0), B]> per result (1), got [3]}}
  %0 = graph.relu %x {sbp.operand_layouts = [#sbp.nd<[S(0)]>], sbp.result_layouts = [3]} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

sbp.mesh @m axes ["dp"] shape [2]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {sbp.mesh = @m} {
  // expected-error @+1 {{'sbp.operand_layouts' must hold one nd-SBP like #sbp.nd<[S(0), B]> per operand (1), got []}}
  %0 = graph.relu %x {sbp.operand_layouts = [], sbp.result_layouts = [#sbp.nd<[S(0)]>]} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that a function's pipeline stages are a positive number (0 made
// --sbp-spmdize drop the whole program) and its ops' stages among them.
sbp.mesh @m axes ["dp"] shape [2]
// expected-error @+1 {{'sbp.stages' must be a positive integer, got 0 : i64}}
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {sbp.mesh = @m, sbp.stages = 0 : i64} {
  return %x : tensor<8x8xf32>
}

// -----

sbp.mesh @m axes ["dp"] shape [2]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {sbp.mesh = @m, sbp.stages = 2 : i64} {
  // expected-error @+1 {{'graph.relu' op 'sbp.stage' 5 is not one of its function's 2 stages}}
  %0 = graph.relu %x {sbp.stage = 5 : i64} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

sbp.mesh @m axes ["dp"] shape [2]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {sbp.mesh = @m, sbp.stages = 2 : i64} {
  // expected-error @+1 {{'sbp.stage' must be a stage number (0, 1, ...), got "one"}}
  %0 = graph.relu %x {sbp.stage = "one"} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that a function's mesh names one (a misspelt name passed every pass).
sbp.mesh @m axes ["dp"] shape [2]
// expected-error @+1 {{'func.func' op '@mesh' does not name an sbp.mesh}}
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {sbp.mesh = @mesh} {
  return %x : tensor<8x8xf32>
}

// -----

sbp.mesh @m axes ["dp"] shape [2]
// expected-error @+1 {{'sbp.mesh' must name an sbp.mesh like @mesh, got "m"}}
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {sbp.mesh = "m"} {
  return %x : tensor<8x8xf32>
}
