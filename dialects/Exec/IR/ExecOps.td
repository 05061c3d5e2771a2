//===- ExecOps.td - the exec dialect -----------------------*- tablegen -*-===//
//
// One rank's program: loading its shards, collectives on mesh-axis groups,
// rank-dependent local changes of layout, and storing its outputs. The
// computation between them is graph-dialect ops on local shapes.
//
//===----------------------------------------------------------------------===//

#ifndef SBPC_EXEC_OPS
#define SBPC_EXEC_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/Sbp/IR/SbpAttrs.td"

def Exec_Dialect : Dialect {
  let name = "exec";
  let cppNamespace = "::sbpc::exec";
  let summary = "one rank's program: shards, collectives, static memory";
  let description = [{
    `--sbp-spmdize` turns a laid-out global function into an exec program: a
    function without arguments or results, run by every rank listed in its
    `exec.ranks` attribute. Its values are the rank's local tensors. It loads
    the rank's shards of the parameters and inputs (`exec.load`), computes
    with graph ops on local shapes, changes layouts with collectives on the
    groups of one mesh axis (`exec.all_reduce`, `exec.all_gather`,
    `exec.reduce_scatter`, `exec.all_to_all`, `exec.broadcast`) or with local
    rank-dependent ops (`exec.local_slice`, `exec.zero_pad`,
    `exec.keep_one`), exchanges tensors point to point between pipeline
    stages (`exec.send`, `exec.recv`), and writes its shards of the outputs
    (`exec.store`).

    Nothing in a program depends on which rank runs it except through the
    rank's mesh coordinates, read at run time: every rank with the same role
    runs the same program. `--exec-plan-memory` gives every value an offset
    in one arena per rank (`exec.offsets`, `exec.scratch_offset`) and the
    program its size (`exec.arena_bytes`). The graph ops whose ids are
    checked at run time (embedding indices, cross-entropy targets) carry
    `exec.index_place`: the ids' global shape and layout and, when they
    come from an input, the static slices back to it (micro-batches), so
    that a rank names a bad id by its place in that input.
  }];
  // Its ops' layouts are sbp attributes: parsing one in a module without
  // an sbp op must find the sbp dialect loaded.
  let dependentDialects = ["::sbpc::sbp::SbpDialect"];
}

class Exec_Op<string mnemonic, list<Trait> traits = []>
    : Op<Exec_Dialect, mnemonic, traits>;

def Exec_AnyTensor : StaticShapeTensorOf<[F32, BF16, I64]>;
// Values that are reduced or computed: f32, or bf16 under --precision bf16.
def Exec_FloatTensor : StaticShapeTensorOf<[F32, BF16]>;


//===----------------------------------------------------------------------===//
// Shards in and out
//===----------------------------------------------------------------------===//

def Exec_LoadOp : Exec_Op<"load"> {
  let summary = "reads this rank's shard of a parameter or input";
  let description = [{
    `kind` is `param` (a tensor of the `.safetensors` file) or `input` (a
    `.npy` file). The rank reads only the block its layout gives it
    (sbprt::blockOf with the rank's coordinates) of the tensor of
    `global_shape`; for a P(sum) layout the rank at coordinate 0 of every
    P(sum) axis holds the value and the others zeros (for P(max) every rank
    holds it). `stored_shape`, parameters only, is the shape in the file
    (the same elements in row-major order, e.g. GPT-2's fused `c_attn`
    weight).

    ```mlir
    %w = exec.load "param" "h.0.mlp.c_fc.weight" global [64, 256] [B, S(1)]
        : tensor<64x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kind, StrAttr:$name, DenseI64ArrayAttr:$global_shape,
                       Sbp_NdSbpAttr:$layout, OptionalAttr<DenseI64ArrayAttr>:$stored_shape);
  let results = (outs Exec_AnyTensor:$result);
  let assemblyFormat = [{
    $kind $name `global` $global_shape custom<NdSbp>($layout) attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_StoreOp : Exec_Op<"store"> {
  let summary = "writes this rank's shard of an output";
  let description = [{
    The driver assembles the global output from every rank's shard and its
    layout (splits concatenated, partials reduced, replicas taken once).
    `stored_shape` is the shape its file gets (the same elements in
    row-major order: an update of GPT-2's fused `c_attn` weight, laid out
    in its view's shape).

    With `rows [i, n]` the value is one of `n` pieces of the shard: rows
    `i`, `i + n`, ... of its dimension 0 (a micro-batch's rows of a
    micro-batched step's output, stored as soon as the micro-batch has
    them); the `n` stores of an output together write its shard.

    ```mlir
    exec.store %y "logits" global [4, 16, 128] [S(0), B] : tensor<2x16x128xf32>
    exec.store %y1 "logits" global [4, 16, 128] [S(0), B] rows [1, 2] : tensor<1x16x128xf32>
    ```
  }];
  let arguments = (ins Exec_AnyTensor:$value, StrAttr:$name, DenseI64ArrayAttr:$global_shape,
                       Sbp_NdSbpAttr:$layout, OptionalAttr<DenseI64ArrayAttr>:$stored_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$rows);
  let assemblyFormat = [{
    $value $name `global` $global_shape custom<NdSbp>($layout) (`rows` $rows^)? attr-dict `:`
    type($value)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives on the group of one mesh axis
//===----------------------------------------------------------------------===//

def Exec_AllReduceOp : Exec_Op<"all_reduce", [AllTypesMatch<["input", "result"]>]> {
  let summary = "every rank of one mesh axis's group gets the group's reduction (P -> B)";
  let arguments = (ins Exec_FloatTensor:$input, I64Attr:$axis, StrAttr:$reduce);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis $reduce attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Exec_AllGatherOp : Exec_Op<"all_gather"> {
  let summary = "S(dim) -> B on one mesh axis: the group's blocks concatenated";
  let arguments = (ins Exec_AnyTensor:$input, I64Attr:$axis, I64Attr:$dim);
  let results = (outs Exec_AnyTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_ReduceScatterOp : Exec_Op<"reduce_scatter"> {
  let summary = "P -> S(dim) on one mesh axis: this rank's block of the reduction";
  let arguments = (ins Exec_FloatTensor:$input, I64Attr:$axis, I64Attr:$dim,
                       StrAttr:$reduce);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `dim` $dim $reduce attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_AllToAllOp : Exec_Op<"all_to_all"> {
  let summary = "S(concat_dim) -> S(split_dim) on one mesh axis";
  let arguments = (ins Exec_AnyTensor:$input, I64Attr:$axis, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs Exec_AnyTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `split` $split_dim `concat` $concat_dim attr-dict `:` type($input)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_BroadcastOp : Exec_Op<"broadcast", [AllTypesMatch<["input", "result"]>]> {
  let summary = "every rank of the group gets the tensor of the rank at coordinate `root`";
  let arguments = (ins Exec_AnyTensor:$input, I64Attr:$axis, I64Attr:$root);
  let results = (outs Exec_AnyTensor:$result);
  let assemblyFormat = "$input `axis` $axis `root` $root attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Exec_SendOp : Exec_Op<"send"> {
  let summary = "sends a tensor to the rank at coordinate `peer` of mesh axis `axis` (pipeline stages)";
  let description = [{
    The receiver is the rank with this rank's coordinates but `peer` on
    `axis`; it receives with an `exec.recv` of the same tag and type.
    The send does not wait for the receiver (the runtime sends a copy);
    messages of one tag between two ranks arrive in the order sent.
  }];
  let arguments = (ins Exec_AnyTensor:$input, I64Attr:$axis, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$input `axis` $axis `to` $peer `tag` $tag attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Exec_RecvOp : Exec_Op<"recv"> {
  let summary = "receives a tensor from the rank at coordinate `peer` of mesh axis `axis`";
  let arguments = (ins I64Attr:$axis, I64Attr:$peer, I64Attr:$tag);
  let results = (outs Exec_AnyTensor:$result);
  let assemblyFormat = "`axis` $axis `from` $peer `tag` $tag attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Local changes of layout (no communication, depend on the coordinate)
//===----------------------------------------------------------------------===//

def Exec_LocalSliceOp : Exec_Op<"local_slice"> {
  let summary = "B -> S(dim) on one mesh axis: keeps the block at this rank's coordinate";
  let arguments = (ins Exec_AnyTensor:$input, I64Attr:$axis, I64Attr:$dim);
  let results = (outs Exec_AnyTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_ZeroPadOp : Exec_Op<"zero_pad"> {
  let summary = "S(dim) -> P on one mesh axis: this rank's block in a tensor of the identity";
  let description = [{
    The result has dimension `dim` as many times larger as the axis has
    devices; the input lands at this rank's coordinate and the rest holds
    the identity of `reduce` (0 for sum, -inf for max).
  }];
  let arguments = (ins Exec_FloatTensor:$input, I64Attr:$axis, I64Attr:$dim,
                       StrAttr:$reduce);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `dim` $dim $reduce attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_KeepOneOp : Exec_Op<"keep_one", [AllTypesMatch<["input", "result"]>]> {
  let summary = "B -> P(sum) on one mesh axis: the rank at coordinate 0 keeps the value, the others hold zeros";
  let arguments = (ins Exec_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Precision
//===----------------------------------------------------------------------===//

def Exec_ConvertOp : Exec_Op<"convert", [Pure]> {
  let summary = "the same values in another float type: f32 to bf16 (nearest, ties to even) or back";
  let description = [{
    `--exec-bf16` puts these where an f32 value (a parameter the optimizer
    updates, a constant) meets bf16 computation, and where a bf16 gradient
    reaches the f32 optimizer.

    ```mlir
    %wb = exec.convert %w : tensor<64x128xf32> to tensor<64x128xbf16>
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$input);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused computation
//===----------------------------------------------------------------------===//

def Exec_FusedOp : Exec_Op<"fused", [IsolatedFromAbove]> {
  let summary = "an elementwise chain computed in one pass over memory (--exec-fuse)";
  let description = [{
    The body is a chain of elementwise graph ops (unary, binary, and the
    relu/gelu gradients) on the block's arguments, which stand for
    `inputs`; `exec.yield` gives the result. Every value the body makes has
    the result's type; an input may have fewer or stretched dimensions and
    is broadcast to the result's shape as NumPy does. Emitters turn it into
    one loop (CPU) or one kernel (CUDA) that reads each input once and
    writes the result once: the intermediates never reach memory.

    ```mlir
    %y = exec.fused(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %0 = graph.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %1 = graph.gelu %0 : tensor<4x8xf32>
      exec.yield %1 : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Exec_FloatTensor>:$inputs);
  let results = (outs Exec_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $result) $body
  }];
  let hasVerifier = 1;
}

def Exec_LinearOp : Exec_Op<"linear", [Pure]> {
  let summary = "a matrix product with its bias (and GELU, or a residual) in the GEMM's epilogue "
                "(--exec-fuse)";
  let description = [{
    `gelu(matmul(input, weight) + bias)`, the GELU there when `gelu` is
    named: what `graph.matmul` by a shared `[K, N]` weight (`[N, K]` with
    `transpose_rhs`), `graph.add` of an `[N]` bias and `graph.gelu` compute
    one after the other. With a `residual` of the result's type instead of
    the GELU, `matmul(input, weight) + bias + residual`: a residual
    connection's `graph.add` too (the CPU adds the bias first, cuBLASLt
    the residual). The sums and the GELU happen as the
    product is written (cuBLASLt's bias and GELU epilogues, and its C
    operand with beta = 1 for the residual, on the GPU; the loop after the
    GEMM on the CPU), so the product never makes a round trip through
    memory. On the CPU the bits are those of the ops one after the other in
    f32; a bf16 result is rounded once, not after each op.

    With the GELU, a second result `preactivation` is the sum before the
    GELU (`matmul(input, weight) + bias`, which a training step's
    `graph.gelu_grad` reads): written by the same epilogue (cuBLASLt's
    `GELU_AUX_BIAS`), where the unfused ops write it and then read it again.

    ```mlir
    %h = exec.linear %x, %w, %b gelu
        : (tensor<2x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    %y = exec.linear %h, %w2, %b2 residual %r
        : (tensor<2x8x64xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>)
        -> tensor<2x8x16xf32>
    %a, %pre = exec.linear %x, %w, %b gelu
        : (tensor<2x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>)
        -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$input, Exec_FloatTensor:$weight,
                       Exec_FloatTensor:$bias, Optional<Exec_FloatTensor>:$residual,
                       UnitAttr:$transpose_rhs, UnitAttr:$gelu);
  let results = (outs Exec_FloatTensor:$result, Optional<Exec_FloatTensor>:$preactivation);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias (`residual` $residual^)? (`transpose_rhs` $transpose_rhs^)?
    (`gelu` $gelu^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Exec_MatmulGeluGradOp : Exec_Op<"matmul_gelu_grad", [Pure]> {
  let summary = "a linear layer's input gradient through the GELU before it, and that layer's "
                "bias gradient, in the GEMM's epilogue (--exec-fuse)";
  let description = [{
    `gelu_grad(preactivation, matmul(grad, weight))`: what `graph.matmul`
    by a shared `[K, N]` weight (`[N, K]` with `transpose_rhs`) and
    `graph.gelu_grad` compute one after the other, the backward of a linear
    layer whose input is a GELU of `preactivation` (the MLP's second layer).
    With a second result `bias_grad`, also the sums of the result over all
    its axes but the last: the gradient of the bias added before the GELU
    (`graph.reduce_sum`, its dimensions kept or not as the result's type
    says). On the GPU, cuBLASLt's `DGELU_BGRAD` (or `DGELU`) epilogue; on
    the CPU, the bits of the ops one after the other in f32, a bf16 result
    rounded once and the bias gradient summed before that rounding.

    ```mlir
    %dpre, %db = exec.matmul_gelu_grad %dy, %w2, %pre transpose_rhs
        : (tensor<2x8x16xf32>, tensor<64x16xf32>, tensor<2x8x64xf32>)
        -> (tensor<2x8x64xf32>, tensor<1x1x64xf32>)
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$grad, Exec_FloatTensor:$weight,
                       Exec_FloatTensor:$preactivation, UnitAttr:$transpose_rhs);
  let results = (outs Exec_FloatTensor:$result, Optional<Exec_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $weight `,` $preactivation (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Exec_MatmulBiasGradOp : Exec_Op<"matmul_bias_grad", [Pure]> {
  let summary = "a linear layer's weight gradient and bias gradient in one GEMM (--exec-fuse)";
  let description = [{
    `matmul(input, grad)` with `input` transposed, `[T, K]^T [T, N]`, the
    weight gradient of a linear layer, and as a second result the sums of
    `grad`'s rows, the gradient of its bias (`graph.reduce_sum` of the
    gradient before it was reshaped to `[T, N]`, of any shape with `N`
    elements). On the GPU, cuBLASLt's `BGRADA` epilogue sums the rows as it
    reads them for the product; on the CPU, the bits of the two ops.

    ```mlir
    %dw, %db = exec.matmul_bias_grad %x, %dy
        : (tensor<16x64xf32>, tensor<16x32xf32>) -> (tensor<64x32xf32>, tensor<1x1x32xf32>)
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$input, Exec_FloatTensor:$grad);
  let results = (outs Exec_FloatTensor:$result, Exec_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Exec_CausalMatmulOp : Exec_Op<"causal_matmul", [Pure]> {
  let summary = "a batched matrix product that skips what a causal mask makes moot (--exec-fuse)";
  let description = [{
    `graph.matmul` (same operands, transposes and result) in one of two
    cases of causal attention, each on square trailing matrices:

    - `lower_result`: only the result's diagonal and below are computed;
      above them it is left unwritten. The scores `q k^T` and their
      gradient `dO v^T`, read only by a causal `exec.softmax` or
      `exec.softmax_grad`.
    - `lower_lhs`: the lhs, as stored, is 0 above its diagonal (the
      probabilities of a causal `exec.softmax` or the gradient of a causal
      `exec.softmax_grad`), so each result row sums only the lhs's
      columns up to the diagonal (from it, under `transpose_lhs`):
      `p v`, `ds k`, and `p^T dO`, `ds^T q`.

    The runtimes compute it in row blocks of the result, each as far as
    the diagonal: about half the work of the whole product.

    ```mlir
    %s = exec.causal_matmul %q, %k transpose_rhs lower_result
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$lhs, Exec_FloatTensor:$rhs, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs, UnitAttr:$lower_lhs, UnitAttr:$lower_result);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`lower_lhs` $lower_lhs^)? (`lower_result` $lower_result^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Exec_SoftmaxOp : Exec_Op<"softmax", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "scale, causal mask and softmax over the last axis in one pass (--exec-fuse)";
  let description = [{
    `softmax(causal_mask(input * scale))` over the last axis, where the
    scale (a 0-d tensor) and the mask are each there when named: what
    `graph.mul` by a scalar, `graph.causal_mask` and `graph.softmax` compute
    one after the other, with the same rounding, reading the scores once
    and writing the probabilities once. A masked position is exactly 0.

    ```mlir
    %p = exec.softmax %scores scale %s : tensor<f32> causal : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$input, Optional<0DTensorOf<[F32, BF16]>>:$scale,
                       UnitAttr:$causal);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^ `:` type($scale))? (`causal` $causal^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Exec_SoftmaxGradOp
    : Exec_Op<"softmax_grad", [Pure, AllTypesMatch<["probs", "grad", "result"]>]> {
  let summary = "the gradient of exec.softmax in one pass (--exec-fuse)";
  let description = [{
    Given the probabilities `probs` and their gradient `grad`, the gradient
    of the scores: `graph.softmax_grad` over the last axis, then
    `graph.causal_mask_grad` (0 above the diagonal) and `graph.mul` by the
    scale, each when named, with the same rounding as those ops. With
    `causal`, `probs` must be 0 above the diagonal (a causal
    `exec.softmax`'s, as --exec-fuse makes sure): a row is read only up to
    the diagonal, and `grad` past it may be memory never written
    (`exec.causal_matmul`).

    ```mlir
    %ds = exec.softmax_grad %p, %dp scale %s : tensor<f32> causal : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$probs, Exec_FloatTensor:$grad,
                       Optional<0DTensorOf<[F32, BF16]>>:$scale, UnitAttr:$causal);
  let results = (outs Exec_FloatTensor:$result);
  let assemblyFormat = [{
    $probs `,` $grad (`scale` $scale^ `:` type($scale))? (`causal` $causal^)? attr-dict `:`
    type($probs)
  }];
  let hasVerifier = 1;
}

def Exec_AttentionOp : Exec_Op<"attention", [Pure]> {
  let summary = "attention's scores, scale, causal mask, softmax and product by the values in "
                "one pass, the scores never in memory (--exec-fuse)";
  let description = [{
    `matmul(softmax(causal_mask(matmul(query, key^T) * scale)), value)`
    over the trailing matrices (query `[..., S, D]`, key `[..., T, D]`,
    value `[..., T, Dv]`, result `[..., S, Dv]`), the scale and the mask
    each there when named (the mask on square scores, S = T): what
    `graph.matmul` with `transpose_rhs`, `exec.softmax` and `graph.matmul`
    compute one after the other, without writing the `[..., S, T]` scores
    or probabilities anywhere. The GPU computes it tile by tile in bf16
    on tensor cores (flash attention's online softmax: a running maximum
    and sum per query row, the result rescaled as keys come), rounding the
    probabilities to bf16 for their product by the values; the CPU
    computes the three ops in f32 per batch entry and rounds the result
    once.

    Where a training step's backward reads the attention
    (`exec.attention_grad`), the op has a second result `lse`, f32
    `[..., S]`: each query row's log-sum-exp, the natural logarithm of
    the sum over its keys of exp(score * scale), the masked keys left out.
    It is what the backward needs to recompute any probability from its
    score alone.

    ```mlir
    %o = exec.attention %q, %k, %v scale %s causal
        : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<bf16>)
        -> tensor<2x4x8x16xbf16>
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$query, Exec_FloatTensor:$key, Exec_FloatTensor:$value,
                       Optional<0DTensorOf<[F32, BF16]>>:$scale, UnitAttr:$causal);
  let results = (outs Exec_FloatTensor:$result, Optional<StaticShapeTensorOf<[F32]>>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`scale` $scale^)? (`causal` $causal^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Exec_AttentionGradOp : Exec_Op<"attention_grad", [Pure]> {
  let summary = "the gradients of exec.attention's query, key and value in one pass, the "
                "scores never in memory (--exec-fuse)";
  let description = [{
    Given an `exec.attention`'s operands (`query [..., S, D]`, `key [...,
    T, D]`, `value [..., T, Dv]`, the scale and mask), its result `output`
    `[..., S, Dv]`, its log-sum-exp `lse` and the gradient of its result
    `grad`, the gradients of the query, key and value, of their shapes
    (the GPU's kernels take Dv = D, as --exec-fuse makes them). With the
    probabilities `P = exp(scores * scale - lse)` (0 where masked):

    - `value_grad = P^T grad`
    - `dS = P * (grad value^T - rowsum(grad * output)) * scale`
    - `query_grad = dS key`, `key_grad = dS^T query`

    what `graph.matmul`, `exec.softmax_grad` and `graph.matmul` compute
    from the probabilities (`rowsum(grad * output)` equals their
    `rowsum(P * (grad value^T))`), without the `[..., S, T]`
    probabilities or their gradient anywhere in memory. The GPU recomputes
    them tile by tile in bf16 on tensor cores (flash attention's
    backward); the CPU computes them in f32 per batch entry and rounds
    each gradient once.

    ```mlir
    %dq, %dk, %dv = exec.attention_grad %q, %k, %v, %o, %lse, %do scale %s causal
        : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>,
           tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>, tensor<bf16>)
        -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
    ```
  }];
  let arguments = (ins Exec_FloatTensor:$query, Exec_FloatTensor:$key, Exec_FloatTensor:$value,
                       Exec_FloatTensor:$output, StaticShapeTensorOf<[F32]>:$lse, Exec_FloatTensor:$grad,
                       Optional<0DTensorOf<[F32, BF16]>>:$scale, UnitAttr:$causal);
  let results = (outs Exec_FloatTensor:$query_grad, Exec_FloatTensor:$key_grad,
                      Exec_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $lse `,` $grad (`scale` $scale^)?
    (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Exec_YieldOp : Exec_Op<"yield", [Terminator, HasParent<"FusedOp">]> {
  let summary = "the result of an exec.fused body";
  let arguments = (ins Exec_FloatTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // SBPC_EXEC_OPS
