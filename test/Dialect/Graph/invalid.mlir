// RUN: sbpc-opt %s --split-input-file --verify-diagnostics

// Tests that incompatible broadcast shapes are named.
func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'graph.add' op operand shapes [2, 3] and [4] do not broadcast}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that a written result type must match the inferred one.
func.func @add_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'graph.mul' op result type 'tensor<3x2xf32>' does not match the inferred 'tensor<2x3xf32>'}}
  %0 = graph.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// Tests that elementwise ops want f32 tensors.
func.func @unary_int(%a: tensor<2xi64>) {
  // expected-error @+1 {{'graph.exp' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values}}
  %0 = graph.exp %a : tensor<2xi64>
  return
}

// -----

// Tests that dynamic shapes are rejected: the graph has global static shapes.
func.func @dynamic(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{'graph.relu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values}}
  %0 = graph.relu %a : tensor<?x3xf32>
  return
}

// -----

// Tests that matmul contracting dimensions must agree.
func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'graph.matmul' op contracting dimensions differ: lhs [2, 3] has K = 3, rhs [4, 5] has K = 4}}
  %0 = graph.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// Tests that matmul operands must be at least matrices.
func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'graph.matmul' op operands must have rank >= 2, got [3] and [3, 5]}}
  %0 = graph.matmul %a, %b : (tensor<3xf32>, tensor<3x5xf32>) -> tensor<5xf32>
  return
}

// -----

// Tests that a batched rhs must have the batch dimensions of lhs.
func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{'graph.matmul' op batch dimensions of lhs [2, 3, 4] and rhs [3, 4, 5] differ}}
  %0 = graph.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

// Tests that rhs is a matrix or as batched as lhs.
func.func @matmul_rhs_rank(%a: tensor<2x3x4x5xf32>, %b: tensor<3x5x6xf32>) {
  // expected-error @+1 {{'graph.matmul' op rhs [3, 5, 6] must be a matrix or have the batch dimensions of lhs [2, 3, 4, 5]}}
  %0 = graph.matmul %a, %b : (tensor<2x3x4x5xf32>, tensor<3x5x6xf32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

// Tests that reduced dimensions must be in range.
func.func @reduce_range(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reduce_sum' op reduced dimension 2 is out of range for rank 2}}
  %0 = graph.reduce_sum %a dims [2] : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

// Tests that reduced dimensions must be ascending and distinct.
func.func @reduce_order(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reduce_max' op reduced dimensions [1, 0] must be distinct and ascending}}
  %0 = graph.reduce_max %a dims [1, 0] : (tensor<2x3xf32>) -> tensor<f32>
  return
}

// -----

// Tests that a reduction needs a dimension.
func.func @reduce_none(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reduce_mean' op needs at least one dimension to reduce}}
  %0 = graph.reduce_mean %a dims [] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that the softmax axis must be in range.
func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.softmax' op axis 2 is out of range for rank 2}}
  %0 = graph.softmax %a axis = 2 : tensor<2x3xf32>
  return
}

// -----

// Tests that the log_softmax axis must be non-negative.
func.func @log_softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.log_softmax' op axis -1 is out of range for rank 2}}
  %0 = graph.log_softmax %a axis = -1 : tensor<2x3xf32>
  return
}

// -----

// Tests that layer_norm scale has the normalized dimension.
func.func @layer_norm_scale(%a: tensor<2x8xf32>, %g: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'graph.layer_norm' op scale shape [4] must be the normalized dimension [8] of input [2, 8]}}
  %0 = graph.layer_norm %a, %g, %b eps = 1.0e-05 : (tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that layer_norm eps must be positive.
func.func @layer_norm_eps(%a: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'graph.layer_norm' op eps must be positive}}
  %0 = graph.layer_norm %a, %g, %b eps = 0.0 : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that transpose needs a permutation.
func.func @transpose_perm(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'graph.transpose' op perm [0, 0, 1] is not a permutation of the 3 dimensions of [2, 3, 4]}}
  %0 = graph.transpose %a perm [0, 0, 1] : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  return
}

// -----

// Tests that reshape keeps the element count.
func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reshape' op cannot reshape [2, 3] (6 elements) to [7] (7 elements)}}
  %0 = graph.reshape %a : (tensor<2x3xf32>) -> tensor<7xf32>
  return
}

// -----

// Tests that reshape keeps the element type.
func.func @reshape_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reshape' op cannot change the element type from 'f32' to 'i64'}}
  %0 = graph.reshape %a : (tensor<2x3xf32>) -> tensor<6xi64>
  return
}

// -----

// Tests that slice bounds stay inside the dimension.
func.func @slice_bounds(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 1 of size 3 cannot be sliced [1, 4)}}
  %0 = graph.slice %a starts [0, 1] limits [2, 4] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that slice has one start and limit per dimension.
func.func @slice_rank(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op starts [0] and limits [2] must each have one entry per dimension of [2, 3]}}
  %0 = graph.slice %a starts [0] limits [2] : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

// Tests that concat inputs agree outside the axis.
func.func @concat_shapes(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{'graph.concat' op input [3, 3] does not match [2, 3] outside axis 1}}
  %0 = graph.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that the concat axis must be in range.
func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.concat' op axis 2 is out of range for rank 2}}
  %0 = graph.concat %a, %a axis = 2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that concat needs an input.
func.func @concat_empty() {
  // expected-error @+1 {{'graph.concat' op needs at least one input}}
  %0 = graph.concat axis = 0 : () -> tensor<2xf32>
  return
}

// -----

// Tests that the embedding table is a matrix.
func.func @embedding_table(%t: tensor<10xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'graph.embedding' op table must be [rows, width], got [10]}}
  %0 = graph.embedding %t, %i : (tensor<10xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

// Tests that embedding indices are int64.
func.func @embedding_ids(%t: tensor<10x4xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{'graph.embedding' op operand #1 must be statically shaped tensor of 64-bit signless integer values}}
  %0 = graph.embedding %t, %i : (tensor<10x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// Tests that causal_mask needs square trailing dimensions.
func.func @causal_square(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'graph.causal_mask' op input [2, 3, 4] must end in a square [queries, keys]}}
  %0 = graph.causal_mask %a : tensor<2x3x4xf32>
  return
}

// -----

// Tests that cross_entropy targets drop only the class dimension.
func.func @cross_entropy_targets(%l: tensor<2x5x7xf32>, %t: tensor<2x7xi64>) {
  // expected-error @+1 {{'graph.cross_entropy' op targets [2, 7] must be the logits shape [2, 5, 7] without its class dimension}}
  %0 = graph.cross_entropy %l, %t : (tensor<2x5x7xf32>, tensor<2x7xi64>) -> tensor<f32>
  return
}

// -----

// Tests that cross_entropy returns a scalar.
func.func @cross_entropy_result(%l: tensor<2x7xf32>, %t: tensor<2xi64>) {
  // expected-error @+1 {{'graph.cross_entropy' op result #0 must be 0D tensor of 32-bit float or bfloat16 type values}}
  %0 = graph.cross_entropy %l, %t : (tensor<2x7xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

// Tests that parameter names are non-empty strings.
// expected-error @+1 {{'func.func' op 'graph.param' must be a non-empty string}}
func.func @param_name(%w: tensor<2xf32> {graph.param = 3 : i64}) {
  return
}

// -----

// Tests that a stored shape keeps the element count.
// expected-error @+1 {{'func.func' op argument #0 has stored shape [4, 5] whose element count differs from its type 'tensor<4x3x4xf32>'}}
func.func @param_shape(%w: tensor<4x3x4xf32> {graph.param = "w", graph.param_shape = array<i64: 4, 5>}) {
  return
}

// -----

// Tests that a result's stored shape keeps the element count.
// expected-error @+1 {{'func.func' op result #1 has stored shape [8] whose element count differs from its type 'tensor<2x3xf32>'}}
func.func @result_shape(%w: tensor<2x3xf32> {graph.param = "w"})
    -> (tensor<2x3xf32> {graph.output = "a", graph.param_shape = array<i64: 6>},
        tensor<2x3xf32> {graph.output = "b", graph.param_shape = array<i64: 8>}) {
  return %w, %w : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Tests that unknown graph argument attributes are rejected.
// expected-error @+1 {{'func.func' op unknown argument attribute 'graph.parameter'}}
func.func @unknown_arg_attr(%w: tensor<2xf32> {graph.parameter = "w"}) {
  return
}

// -----

// Tests that unknown graph result attributes are rejected.
// expected-error @+1 {{'func.func' op unknown result attribute 'graph.outputs'}}
func.func @unknown_result_attr(%w: tensor<2xf32>) -> (tensor<2xf32> {graph.outputs = "y"}) {
  return %w : tensor<2xf32>
}

// -----

// Tests that an op the dialect does not have is an error, not a crash.
func.func @unknown_op(%a: tensor<2xf32>) {
  // expected-error @+1 {{custom op 'graph.frobnicate' is unknown}}
  %0 = graph.frobnicate %a : tensor<2xf32>
  return
}

// -----

// Tests that a pointwise gradient has the type of its input.
func.func @relu_grad_types(%x: tensor<2x3xf32>, %dy: tensor<3x2xf32>) {
  // expected-error @+1 {{'graph.relu_grad' op grad shape [3, 2] must equal input shape [2, 3]}}
  %0 = "graph.relu_grad"(%x, %dy) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that softmax_grad's gradient has the output's shape.
func.func @softmax_grad_shape(%y: tensor<2x3xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'graph.softmax_grad' op grad shape [2, 4] must equal output shape [2, 3]}}
  %0 = "graph.softmax_grad"(%y, %dy) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that the softmax_grad axis must be in range.
func.func @softmax_grad_axis(%y: tensor<2x3xf32>, %dy: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.softmax_grad' op axis 5 is out of range for rank 2}}
  %0 = graph.softmax_grad %y, %dy axis = 5 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that layer_norm_grad wants a gradient of the input's shape.
func.func @layer_norm_grad_shape(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<3x8xf32>) {
  // expected-error @+1 {{'graph.layer_norm_grad' op grad shape [3, 8] must equal input shape [2, 8]}}
  %0:3 = graph.layer_norm_grad %x, %g, %dy eps = 1.0e-05 : (tensor<2x8xf32>, tensor<8xf32>, tensor<3x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that layer_norm_grad's scale has the normalized dimension.
func.func @layer_norm_grad_scale(%x: tensor<2x8xf32>, %g: tensor<2xf32>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{'graph.layer_norm_grad' op scale shape [2] must be the normalized dimension [8] of input [2, 8]}}
  %0:3 = graph.layer_norm_grad %x, %g, %dy eps = 1.0e-05 : (tensor<2x8xf32>, tensor<2xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that embedding_grad's gradient matches the indices.
func.func @embedding_grad_shape(%i: tensor<2x3xi64>, %dy: tensor<2x4x5xf32>) {
  // expected-error @+1 {{'graph.embedding_grad' op grad [2, 4, 5] must be the indices shape [2, 3] plus a width}}
  %0 = graph.embedding_grad %i, %dy rows = 10 : (tensor<2x3xi64>, tensor<2x4x5xf32>) -> tensor<10x5xf32>
  return
}

// -----

// Tests that embedding_grad needs rows.
func.func @embedding_grad_rows(%i: tensor<3xi64>, %dy: tensor<3x5xf32>) {
  // expected-error @+1 {{'graph.embedding_grad' op rows must be positive, got 0}}
  %0 = graph.embedding_grad %i, %dy rows = 0 : (tensor<3xi64>, tensor<3x5xf32>) -> tensor<1x5xf32>
  return
}

// -----

// Tests that causal_mask_grad needs square trailing dimensions.
func.func @causal_mask_grad_square(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'graph.causal_mask_grad' op input [4, 3] must end in a square [queries, keys]}}
  %0 = graph.causal_mask_grad %a : tensor<4x3xf32>
  return
}

// -----

// Tests that cross_entropy_grad targets drop only the class dimension.
func.func @cross_entropy_grad_targets(%l: tensor<4x7xf32>, %t: tensor<7xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{'graph.cross_entropy_grad' op targets [7] must be the logits shape [4, 7] without its class dimension}}
  %0 = graph.cross_entropy_grad %l, %t, %d : (tensor<4x7xf32>, tensor<7xi64>, tensor<f32>) -> tensor<4x7xf32>
  return
}

// -----

// Tests that cross_entropy_grad takes a scalar loss gradient.
func.func @cross_entropy_grad_scalar(%l: tensor<4x7xf32>, %t: tensor<4xi64>, %d: tensor<1xf32>) {
  // expected-error @+1 {{'graph.cross_entropy_grad' op operand #2 must be 0D tensor of 32-bit float or bfloat16 type values}}
  %0 = graph.cross_entropy_grad %l, %t, %d : (tensor<4x7xf32>, tensor<4xi64>, tensor<1xf32>) -> tensor<4x7xf32>
  return
}

// -----

// Tests that padding is non-negative.
func.func @pad_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.pad' op padding of dimension 1 must be non-negative, got [-1, 0]}}
  %0 = graph.pad %x low [0, -1] high [0, 0] : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

// Tests that pad has one entry per dimension.
func.func @pad_rank(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.pad' op low [0] and high [0, 0] must each have one entry per dimension of [2, 3]}}
  %0 = graph.pad %x low [0] high [0, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that broadcast follows NumPy's rule.
func.func @broadcast_bad(%x: tensor<3x2xf32>) {
  // expected-error @+1 {{'graph.broadcast' op cannot broadcast [3, 2] to [2, 3, 4]}}
  %0 = graph.broadcast %x : (tensor<3x2xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

// Tests that broadcast cannot shrink.
func.func @broadcast_shrink(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.broadcast' op cannot broadcast [2, 3] to [3]}}
  %0 = graph.broadcast %x : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

// Tests that optimizer state has the parameter's shape.
func.func @sgd_shapes(%w: tensor<8xf32>, %g: tensor<8xf32>, %v: tensor<4xf32>) {
  // expected-error @+1 {{'graph.sgd_update' op velocity shape [4] must equal param shape [8]}}
  %0:2 = graph.sgd_update %w, %g, %v lr = 0.1 momentum = 0.9 weight_decay = 0.0 : (tensor<8xf32>, tensor<8xf32>, tensor<4xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that momentum lies in [0, 1).
func.func @sgd_momentum(%w: tensor<8xf32>) {
  // expected-error @+1 {{'graph.sgd_update' op momentum must be in [0, 1), got 1.5}}
  %0:2 = graph.sgd_update %w, %w, %w lr = 0.1 momentum = 1.5 weight_decay = 0.0 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that a learning rate is not negative.
func.func @adamw_lr(%w: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'graph.adamw_update' op lr must be non-negative and finite, got -0.001}}
  %0:3 = graph.adamw_update %w, %w, %w, %w, %s lr = -1.0e-03 beta1 = 0.9 beta2 = 0.999 eps = 1.0e-08 weight_decay = 0.0 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that a hyperparameter is finite.
func.func @sgd_inf(%w: tensor<8xf32>) {
  // expected-error @+1 {{'graph.sgd_update' op weight_decay must be non-negative and finite, got inf}}
  %0:2 = graph.sgd_update %w, %w, %w lr = 0.1 momentum = 0.9 weight_decay = 0x7FF0000000000000 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that AdamW's second moment has the parameter's shape.
func.func @adamw_shapes(%w: tensor<8xf32>, %v: tensor<2x4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'graph.adamw_update' op v shape [2, 4] must equal param shape [8]}}
  %0:3 = graph.adamw_update %w, %w, %w, %v, %s lr = 1.0e-03 beta1 = 0.9 beta2 = 0.999 eps = 1.0e-08 weight_decay = 0.0 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that AdamW's eps is positive.
func.func @adamw_eps(%w: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'graph.adamw_update' op eps must be positive and finite, got 0}}
  %0:3 = graph.adamw_update %w, %w, %w, %w, %s lr = 1.0e-03 beta1 = 0.9 beta2 = 0.999 eps = 0.0 weight_decay = 0.0 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that zero-size dimensions are rejected where they are written.
func.func @zero_size(%a: tensor<2x0xf32>, %g: tensor<0xf32>) {
  // expected-error @+1 {{'graph.layer_norm' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values with positive sizes, but got 'tensor<2x0xf32>'}}
  %0 = graph.layer_norm %a, %g, %g eps = 1.0e-05 : (tensor<2x0xf32>, tensor<0xf32>, tensor<0xf32>) -> tensor<2x0xf32>
  return
}

// -----

// Tests that a tensor whose byte size overflows is rejected.
func.func @huge(%a: tensor<4294967296x4294967296xf32>) {
  // expected-error @+1 {{'graph.relu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values with positive sizes}}
  %0 = graph.relu %a : tensor<4294967296x4294967296xf32>
  return
}

// -----

// Tests that padding cannot overflow a dimension.
func.func @pad_overflow(%x: tensor<2xf32>) {
  // expected-error @+1 {{'graph.pad' op padding of dimension 0 is too large}}
  %0 = graph.pad %x low [9223372036854775807] high [0] : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

// Tests that a parameter's stored shape is an array of positive sizes.
// expected-error @+1 {{'func.func' op 'graph.param_shape' must be an array<i64> of positive sizes}}
func.func @param_shape_sizes(%w: tensor<4xf32> {graph.param = "w", graph.param_shape = array<i64: 4, 0>}) {
  return
}

// -----

// Tests that layer_norm needs a dimension to normalize.
func.func @layer_norm_scalar(%a: tensor<f32>) {
  // expected-error @+1 {{'graph.layer_norm' op input must have rank >= 1}}
  %0 = graph.layer_norm %a, %a, %a eps = 1.0e-05 : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

// Tests that an output name cannot escape the output directory.
// expected-error @+1 {{'func.func' op output name '../x' must be a plain file name (no '/', not '.' or '..')}}
func.func @escape(%w: tensor<2xf32>) -> (tensor<2xf32> {graph.output = "../x"}) {
  return %w : tensor<2xf32>
}

// -----

// Tests that names hold no control characters (a NUL cut a file name short,
// and two outputs wrote one file).
// expected-error @+1 {{'func.func' op 'graph.output' "a\00b" must not hold control characters}}
func.func @nul_name(%w: tensor<2xf32>) -> (tensor<2xf32> {graph.output = "a\00b"}) {
  return %w : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'graph.param' "w\0A" must not hold control characters}}
func.func @newline_name(%w: tensor<2xf32> {graph.param = "w\0A"}) -> tensor<2xf32> {
  return %w : tensor<2xf32>
}

// -----

// An op computes in one precision: f32 and bf16 operands do not mix.
func.func @mixed_precision(%a: tensor<2x3xf32>, %b: tensor<3xbf16>) {
  // expected-error @+1 {{'graph.add' op float operands must have one element type, got 'f32' and 'bf16'}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<3xbf16>) -> tensor<2x3xf32>
  return
}

// -----

// Models are f32: a bf16 constant has no place in one (--exec-bf16 makes
// bf16 copies of constants where its programs need them).
func.func @bf16_constant() {
  // expected-error @+1 {{'graph.constant' op result #0 must be statically shaped tensor of 32-bit float or 64-bit signless integer values with positive sizes, but got 'tensor<bf16>'}}
  %0 = graph.constant dense<1.0> : tensor<bf16>
  return
}

// -----

// Tests that only parameters have a stored shape (a checkpoint's layout).
// expected-error @+1 {{'func.func' op argument #0 has 'graph.param_shape' but is not a parameter (graph.param): only parameters have a stored shape}}
func.func @input_stored_shape(%x: tensor<2x3xf32> {graph.input = "x", graph.param_shape = array<i64: 6>}) -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}
