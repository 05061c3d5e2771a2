// RUN: sbpc-opt %s --split-input-file --verify-diagnostics

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  // expected-error @+1 {{'exec.load' op local type 'tensor<8x6xf32>' is not the shard [4, 6] of global shape [8, 6] under [S(0)]}}
  %w = exec.load "param" "w" global [8, 6] [S(0)] : tensor<8x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  // expected-error @+1 {{'exec.load' op kind must be "param" or "input", got "weight"}}
  %w = exec.load "weight" "w" global [8, 6] [B] : tensor<8x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  // expected-error @+1 {{'exec.load' op layout [S(0)]: dimension 0 of size 3 is not divisible by mesh axis 'a' of size 2}}
  %w = exec.load "input" "w" global [3, 6] [S(0)] : tensor<1x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.all_gather' op result dimension 0 is 4, expected 8 on a mesh axis of 2 devices}}
  %g = exec.all_gather %x axis 0 dim 0 : tensor<4x6xf32> -> tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.all_reduce' op mesh axis 1 does not exist (the mesh has 1)}}
  %r = exec.all_reduce %x axis 1 "sum" : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.reduce_scatter' op reduction must be "sum" or "max", got "mean"}}
  %r = exec.reduce_scatter %x axis 0 dim 0 "mean" : tensor<4x6xf32> -> tensor<2x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [4]
func.func @p(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'exec.local_slice' op dimension 0 of size 6 does not split into 4 parts}}
  %r = exec.local_slice %x axis 0 dim 0 : tensor<6x8xf32> -> tensor<1x8xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.all_to_all' op split and concat dimensions must differ}}
  %r = exec.all_to_all %x axis 0 split 1 concat 1 : tensor<4x6xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.zero_pad' op needs an sbp.mesh in its module}}
  %r = exec.zero_pad %x axis 0 dim 0 "sum" : tensor<4x6xf32> -> tensor<8x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.broadcast' op root 2 is not a coordinate of an axis of 2 devices}}
  %r = exec.broadcast %x axis 0 root 2 : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.keep_one' op mesh axis 3 does not exist (the mesh has 1)}}
  %r = exec.keep_one %x axis 3 : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.send' op peer 2 is not a coordinate of an axis of 2 devices}}
  exec.send %x axis 0 to 2 tag 0 : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a", "b"] shape [2, 1]
func.func @p() {
  // expected-error @+1 {{'exec.recv' op has no peer on an axis of one device}}
  %x = exec.recv axis 1 from 0 tag 0 : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.send' op tag 32768 is out of range (0 to 32767)}}
  exec.send %x axis 0 to 1 tag 32768 : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.send' op mesh axis 1 does not exist (the mesh has 1)}}
  exec.send %x axis 1 to 1 tag 0 : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  // expected-error @+1 {{'exec.load' op only parameters have a stored shape}}
  %x = exec.load "input" "x" global [4, 6] [B] {stored_shape = array<i64: 24>} : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  %x = exec.load "input" "x" global [4, 6] [B] : tensor<4x6xf32>
  // expected-error @+1 {{'exec.store' op stored shape [25] does not hold as many elements as the global shape}}
  exec.store %x "y" global [4, 6] [B] {stored_shape = array<i64: 25>} : tensor<4x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %b = exec.load "input" "b" global [4] [B] : tensor<4xf32>
  // expected-error @+1 {{'exec.fused' op input 1 of type 'tensor<4xf32>' does not broadcast to 'tensor<4x8xf32>'}}
  %y = exec.fused(%x, %b) : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<4xf32>):
    exec.yield %a : tensor<4x8xf32>
  }
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %y = exec.fused(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{'graph.reduce_sum' op in exec.fused must make one value of the result's type 'tensor<4x8xf32>'}}
    %s = graph.reduce_sum %a dims [1] : (tensor<4x8xf32>) -> tensor<4xf32>
    exec.yield %a : tensor<4x8xf32>
  }
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @q() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  // expected-error @+1 {{'exec.softmax' op with causal needs square trailing dimensions, got 'tensor<4x8xf32>'}}
  %y = exec.softmax %x causal : tensor<4x8xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @r() {
  %x = exec.load "input" "x" global [] [B] : tensor<f32>
  // expected-error @+1 {{'exec.softmax_grad' op needs scores of rank 1 or more, got 'tensor<f32>'}}
  %y = exec.softmax_grad %x, %x : tensor<f32>
  return
}

// -----

// Layout changes move elements; only exec.convert changes their type.
sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  %x = exec.load "input" "x" global [8, 6] [S(0)] : tensor<4x6xbf16>
  // expected-error @+1 {{'exec.all_gather' op result element type 'f32' differs from the input's 'bf16'}}
  %g = exec.all_gather %x axis 0 dim 0 : tensor<4x6xbf16> -> tensor<8x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @p() {
  %x = exec.load "input" "x" global [8, 6] [B] : tensor<8x6xf32>
  // expected-error @+1 {{'exec.convert' op cannot change the shape from 'tensor<8x6xf32>' to 'tensor<6x8xbf16>'}}
  %c = exec.convert %x : tensor<8x6xf32> to tensor<6x8xbf16>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_k() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [6, 3] [B] : tensor<6x3xf32>
  %b = exec.load "param" "b" global [3] [B] : tensor<3xf32>
  // expected-error @+1 {{'exec.linear' op contracts 8 input columns with 6 weight rows}}
  %y = exec.linear %x, %w, %b : (tensor<4x8xf32>, tensor<6x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_bias() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [3, 8] [B] : tensor<3x8xf32>
  %b = exec.load "param" "b" global [8] [B] : tensor<8xf32>
  // expected-error @+1 {{'exec.linear' op bias 'tensor<8xf32>' must have the 3 output columns}}
  %y = exec.linear %x, %w, %b transpose_rhs : (tensor<4x8xf32>, tensor<3x8xf32>, tensor<8xf32>) -> tensor<4x3xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_result() {
  %x = exec.load "input" "x" global [2, 4, 8] [B] : tensor<2x4x8xf32>
  %w = exec.load "param" "w" global [8, 3] [B] : tensor<8x3xf32>
  %b = exec.load "param" "b" global [3] [B] : tensor<3xf32>
  // expected-error @+1 {{'exec.linear' op result 'tensor<8x3xf32>' must have shape 'tensor<2x4x3xf32>'}}
  %y = exec.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_rank() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [2, 8, 3] [B] : tensor<2x8x3xf32>
  %b = exec.load "param" "b" global [3] [B] : tensor<3xf32>
  // expected-error @+1 {{'exec.linear' op needs an input of rank 2 or more, a rank-2 weight and a rank-1 bias, got 'tensor<4x8xf32>', 'tensor<2x8x3xf32>' and 'tensor<3xf32>'}}
  %y = exec.linear %x, %w, %b : (tensor<4x8xf32>, tensor<2x8x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_type() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xbf16>
  %w = exec.load "param" "w" global [8, 3] [B] : tensor<8x3xf32>
  %b = exec.load "param" "b" global [3] [B] : tensor<3xf32>
  // expected-error @+1 {{'exec.linear' op operands and result must have one element type, got 'bf16' and 'f32'}}
  %y = exec.linear %x, %w, %b gelu : (tensor<4x8xbf16>, tensor<8x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_preactivation() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 3] [B] : tensor<8x3xf32>
  %b = exec.load "param" "b" global [3] [B] : tensor<3xf32>
  // expected-error @+1 {{'exec.linear' op has a preactivation result only with the GELU}}
  %y, %p = exec.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @matmul_gelu_grad_shape() {
  %g = exec.load "input" "g" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [3, 8] [B] : tensor<3x8xf32>
  %p = exec.load "input" "p" global [4, 8] [B] : tensor<4x8xf32>
  // expected-error @+1 {{'exec.matmul_gelu_grad' op preactivation 'tensor<4x8xf32>' and result 'tensor<4x8xf32>' must have shape 'tensor<4x3xf32>'}}
  %d = exec.matmul_gelu_grad %g, %w, %p transpose_rhs : (tensor<4x8xf32>, tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @matmul_gelu_grad_bias() {
  %g = exec.load "input" "g" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 3] [B] : tensor<8x3xf32>
  %p = exec.load "input" "p" global [4, 3] [B] : tensor<4x3xf32>
  // expected-error @+1 {{'exec.matmul_gelu_grad' op bias gradient 'tensor<1x4xf32>' must have 3 elements of 'f32'}}
  %d, %db = exec.matmul_gelu_grad %g, %w, %p : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<1x4xf32>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @matmul_bias_grad_rows() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %g = exec.load "input" "g" global [6, 3] [B] : tensor<6x3xf32>
  // expected-error @+1 {{'exec.matmul_bias_grad' op needs rank-2 input and gradient with the same rows, got 'tensor<4x8xf32>' and 'tensor<6x3xf32>'}}
  %dw, %db = exec.matmul_bias_grad %x, %g : (tensor<4x8xf32>, tensor<6x3xf32>) -> (tensor<8x3xf32>, tensor<3xf32>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @matmul_bias_grad_result() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %g = exec.load "input" "g" global [4, 3] [B] : tensor<4x3xf32>
  // expected-error @+1 {{'exec.matmul_bias_grad' op result 'tensor<3x8xf32>' must be 'tensor<8x3xf32>'}}
  %dw, %db = exec.matmul_bias_grad %x, %g : (tensor<4x8xf32>, tensor<4x3xf32>) -> (tensor<3x8xf32>, tensor<3xf32>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @attention_causal() {
  %q = exec.load "input" "q" global [2, 4, 8] [B] : tensor<2x4x8xbf16>
  %k = exec.load "input" "k" global [2, 6, 8] [B] : tensor<2x6x8xbf16>
  // expected-error @+1 {{'exec.attention' op with causal needs as many keys as queries, got 4 and 6}}
  %o = exec.attention %q, %k, %k causal : (tensor<2x4x8xbf16>, tensor<2x6x8xbf16>, tensor<2x6x8xbf16>) -> tensor<2x4x8xbf16>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @attention_values() {
  %q = exec.load "input" "q" global [2, 4, 8] [B] : tensor<2x4x8xbf16>
  %v = exec.load "input" "v" global [2, 5, 8] [B] : tensor<2x5x8xbf16>
  // expected-error @+1 {{'exec.attention' op needs keys of the queries' width and a value per key, got 'tensor<2x4x8xbf16>', 'tensor<2x4x8xbf16>' and 'tensor<2x5x8xbf16>'}}
  %o = exec.attention %q, %q, %v : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x5x8xbf16>) -> tensor<2x4x8xbf16>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @attention_lse() {
  %q = exec.load "input" "q" global [2, 4, 8] [B] : tensor<2x4x8xbf16>
  // expected-error @+1 {{'exec.attention' op log-sum-exp 'tensor<2x8xf32>' must have shape 'tensor<2x4xf32>'}}
  %o, %lse = exec.attention %q, %q, %q : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x8xf32>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @attention_grad_grad() {
  %q = exec.load "input" "q" global [2, 4, 8] [B] : tensor<2x4x8xbf16>
  %lse = exec.load "input" "lse" global [2, 4] [B] : tensor<2x4xf32>
  %g = exec.load "input" "g" global [2, 4, 6] [B] : tensor<2x4x6xbf16>
  // expected-error @+1 {{'exec.attention_grad' op gradient 'tensor<2x4x6xbf16>' must have the output's type 'tensor<2x4x8xbf16>'}}
  %dq, %dk, %dv = exec.attention_grad %q, %q, %q, %q, %lse, %g : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4x6xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @attention_grad_results() {
  %q = exec.load "input" "q" global [2, 4, 8] [B] : tensor<2x4x8xbf16>
  %k = exec.load "input" "k" global [2, 6, 8] [B] : tensor<2x6x8xbf16>
  %lse = exec.load "input" "lse" global [2, 4] [B] : tensor<2x4xf32>
  // expected-error @+1 {{'exec.attention_grad' op gradient 'tensor<2x4x8xbf16>' must have its operand's type 'tensor<2x6x8xbf16>'}}
  %dq, %dk, %dv = exec.attention_grad %q, %k, %k, %q, %lse, %q : (tensor<2x4x8xbf16>, tensor<2x6x8xbf16>, tensor<2x6x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x6x8xbf16>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @attention_grad_causal() {
  %q = exec.load "input" "q" global [2, 4, 8] [B] : tensor<2x4x8xbf16>
  %k = exec.load "input" "k" global [2, 6, 8] [B] : tensor<2x6x8xbf16>
  %lse = exec.load "input" "lse" global [2, 4] [B] : tensor<2x4xf32>
  // expected-error @+1 {{'exec.attention_grad' op with causal needs as many keys as queries, got 4 and 6}}
  %dq, %dk, %dv = exec.attention_grad %q, %k, %k, %q, %lse, %q causal : (tensor<2x4x8xbf16>, tensor<2x6x8xbf16>, tensor<2x6x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x6x8xbf16>, tensor<2x6x8xbf16>)
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @causal_matmul_kind() {
  %x = exec.load "input" "x" global [2, 4, 4] [B] : tensor<2x4x4xf32>
  // expected-error @+1 {{'exec.causal_matmul' op needs exactly one of lower_lhs and lower_result}}
  %y = exec.causal_matmul %x, %x : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @causal_matmul_square() {
  %x = exec.load "input" "x" global [4, 3] [B] : tensor<4x3xf32>
  %w = exec.load "input" "w" global [3, 4] [B] : tensor<3x4xf32>
  // expected-error @+1 {{'exec.causal_matmul' op with lower_lhs needs a square lhs, got 'tensor<4x3xf32>'}}
  %y = exec.causal_matmul %x, %w lower_lhs : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @causal_matmul_shapes() {
  %q = exec.load "input" "q" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  // expected-error @+1 {{'exec.causal_matmul' op contracting dimensions differ: lhs [2, 4, 3] has K = 3, rhs [2, 4, 3] has K = 4}}
  %s = exec.causal_matmul %q, %q lower_result : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @causal_matmul_result() {
  %q = exec.load "input" "q" global [2, 4, 3] [B] : tensor<2x4x3xf32>
  // expected-error @+1 {{'exec.causal_matmul' op result 'tensor<2x4x5xf32>' must have shape [2, 4, 4]}}
  %s = exec.causal_matmul %q, %q transpose_rhs lower_result : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_residual() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 3] [B] : tensor<8x3xf32>
  %b = exec.load "param" "b" global [3] [B] : tensor<3xf32>
  // expected-error @+1 {{'exec.linear' op residual 'tensor<3xf32>' must have the result's type 'tensor<4x3xf32>'}}
  %y = exec.linear %x, %w, %b residual %b : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @linear_residual_gelu() {
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  %w = exec.load "param" "w" global [8, 3] [B] : tensor<8x3xf32>
  %b = exec.load "param" "b" global [3] [B] : tensor<3xf32>
  %r = exec.load "input" "r" global [4, 3] [B] : tensor<4x3xf32>
  // expected-error @+1 {{'exec.linear' op takes a residual or the GELU, not both}}
  %y = exec.linear %x, %w, %b residual %r gelu : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// A piece of a shard: rows [i, n] with i < n, n pieces dividing the
// shard's rows, the value the piece's shape.
sbp.mesh @m axes ["a"] shape [2]
func.func @rows(%x: tensor<2x6xf32>, %y: tensor<3x6xf32>) {
  // expected-error @+1 {{'exec.store' op rows must be [i, n] with 0 <= i < n and n >= 2}}
  exec.store %x "y" global [8, 6] [S(0)] rows [2, 2] : tensor<2x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @rows3(%y: tensor<1x6xf32>) {
  // expected-error @+1 {{'exec.store' op a shard of 4 rows cannot be stored in 3 pieces}}
  exec.store %y "y" global [8, 6] [S(0)] rows [0, 3] : tensor<1x6xf32>
  return
}

// -----

sbp.mesh @m axes ["a"] shape [2]
func.func @rows4(%y: tensor<4x6xf32>) {
  // expected-error @+1 {{'exec.store' op local type 'tensor<4x6xf32>' is not the shard [2, 6] of global shape [4, 6] under [S(0)]}}
  exec.store %y "y" global [8, 6] [S(0)] rows [0, 2] : tensor<4x6xf32>
  return
}
