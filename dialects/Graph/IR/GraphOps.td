//===- GraphOps.td - graph dialect operations -------------*- tablegen -*-===//
//
// Every op infers its result type from its operands and attributes; the
// verifier compares that with the written type and names the bad shape.
//
//===----------------------------------------------------------------------===//

#ifndef SBPC_GRAPH_OPS
#define SBPC_GRAPH_OPS

include "dialects/Graph/IR/GraphDialect.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

// Static shapes whose sizes are all positive and whose byte size fits in
// int64: zero-size and overflowing tensors are rejected where they are written.
class Graph_TensorOf<list<Type> types>
    : Type<And<[StaticShapeTensorOf<types>.predicate,
                CPred<"::sbpc::graph::isValidShape(::llvm::cast<::mlir::ShapedType>($_self))">]>,
           StaticShapeTensorOf<types>.summary # " with positive sizes",
           "::mlir::RankedTensorType">;
// Computation takes f32 or bf16 (what --precision bf16 makes of an exec
// program's values: every float operand of an op has the same type); models
// are written in f32, and the optimizer updates stay f32.
def Graph_FloatTensor : Graph_TensorOf<[F32, BF16]>;
def Graph_F32Tensor : Graph_TensorOf<[F32]>;
def Graph_IndexTensor : Graph_TensorOf<[I64]>;
def Graph_AnyTensor : Graph_TensorOf<[F32, BF16, I64]>;

// Every op says how gradients flow through it (GraphGradients.cpp), or that
// they do not.
def Graph_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::sbpc::graph";
  let description = [{
    Reverse-mode differentiation of one op, used by `--graph-autodiff`.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the gradient of a scalar
        loss with respect to each operand, given its gradient with respect
        to each result (`resultGrads`, one per result, null where none
        flows). Sets one value per operand in `operandGrads`, null where the
        operand has no gradient (indices). Fails with a diagnostic on ops
        that cannot be differentiated.
      }], "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$b, "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic,
         !listconcat(traits, [Pure, DeclareOpInterfaceMethods<Graph_GradientOpInterface>])>;

// Runs an op's shape rule before InferTypeOpInterface's own check, so that a
// bad shape gets the rule's precise message instead of a generic one.
def Graph_ShapeRuleFirst : NativeOpTrait<"ShapeRuleFirst"> {
  let cppNamespace = "::sbpc::graph";
}

// Most ops compute their result type from operands and attributes.
class Graph_InferredOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat(traits, [Graph_ShapeRuleFirst, InferTypeOpAdaptor])>;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_InferredOp<"constant", [ConstantLike]> {
  let summary = "a constant tensor";
  let description = [{
    ```mlir
    %scale = graph.constant dense<0.125> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  // f32 and i64 only: bf16 enters a program through --exec-bf16, which
  // converts constants where they are used.
  let results = (outs Graph_TensorOf<[F32, I64]>:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// With SameOperandsAndResultType, ODS writes the type inference itself.
class Graph_UnaryOp<string mnemonic, string formula>
    : Graph_Op<mnemonic, [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "elementwise " # mnemonic;
  let description = "Computes `" # formula # "` for every element.";
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_NegOp : Graph_UnaryOp<"neg", "-x">;
def Graph_ExpOp : Graph_UnaryOp<"exp", "exp(x)">;
def Graph_LogOp : Graph_UnaryOp<"log", "log(x)">;
def Graph_TanhOp : Graph_UnaryOp<"tanh", "tanh(x)">;
def Graph_SqrtOp : Graph_UnaryOp<"sqrt", "sqrt(x)">;
def Graph_RsqrtOp : Graph_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Graph_ReluOp : Graph_UnaryOp<"relu", "max(x, 0)">;
def Graph_GeluOp : Graph_UnaryOp<"gelu",
    "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))">;

class Graph_BinaryOp<string mnemonic, string formula>
    : Graph_InferredOp<mnemonic> {
  let summary = "elementwise " # mnemonic # " with NumPy broadcasting";
  let description = "Computes `" # formula # "`; the operand shapes broadcast "
      "as in NumPy (aligned at the trailing dimension, size-1 dimensions "
      "stretch).";
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *ctx, std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferBroadcast<$cppClass>(ctx, loc, adaptor, types);
    }
  }];
}

def Graph_AddOp : Graph_BinaryOp<"add", "lhs + rhs">;
def Graph_SubOp : Graph_BinaryOp<"sub", "lhs - rhs">;
def Graph_MulOp : Graph_BinaryOp<"mul", "lhs * rhs">;
def Graph_DivOp : Graph_BinaryOp<"div", "lhs / rhs">;

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Graph_MatmulOp : Graph_InferredOp<"matmul"> {
  let summary = "matrix product, optionally batched";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_lhs`). `rhs` is
    either a matrix `[K, N]` shared by every batch entry (a linear layer) or
    has the same batch dimensions as `lhs`: `[..., K, N]` (`[..., N, K]` with
    `transpose_rhs`). The result is `[..., M, N]`.

    ```mlir
    %logits = graph.matmul %h, %wte transpose_rhs
        : (tensor<2x16x64xf32>, tensor<128x64xf32>) -> tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class Graph_ReduceOp<string mnemonic> : Graph_InferredOp<mnemonic> {
  let summary = "reduce_" # mnemonic # " over the listed dimensions";
  let description = [{
    Reduces over `dims` (distinct, in range, ascending); `keepdims` keeps the
    reduced dimensions with size 1.

    ```mlir
    %s = graph.reduce_sum %x dims [1] keepdims : (tensor<4x8xf32>) -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdims);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dims` $dims (`keepdims` $keepdims^)? attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *ctx, std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferReduce<$cppClass>(ctx, loc, adaptor, types);
    }
  }];
}

def Graph_ReduceSumOp : Graph_ReduceOp<"reduce_sum">;
def Graph_ReduceMeanOp : Graph_ReduceOp<"reduce_mean">;
def Graph_ReduceMaxOp : Graph_ReduceOp<"reduce_max">;

class Graph_SoftmaxLikeOp<string mnemonic, string formula>
    : Graph_Op<mnemonic, [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = mnemonic # " along one axis";
  let description = "Computes `" # formula # "` along `axis`, subtracting "
      "the maximum first for stability.";
  let arguments = (ins Graph_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Graph_SoftmaxOp : Graph_SoftmaxLikeOp<"softmax", "exp(x) / sum(exp(x))">;
def Graph_LogSoftmaxOp
    : Graph_SoftmaxLikeOp<"log_softmax", "x - log(sum(exp(x)))">;

def Graph_LayerNormOp : Graph_InferredOp<"layer_norm"> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + eps) * scale + bias` over the last dimension,
    with the biased variance; `scale` and `bias` have the shape of that
    dimension.

    ```mlir
    %y = graph.layer_norm %x, %g, %b eps = 1.0e-05
        : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `eps` `=` $eps attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Graph_TransposeOp : Graph_InferredOp<"transpose"> {
  let summary = "permutes dimensions";
  let description = [{
    Result dimension `i` is input dimension `perm[i]`.

    ```mlir
    %t = graph.transpose %x perm [0, 2, 1, 3]
        : (tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$input `perm` $perm attr-dict `:` functional-type(operands, results)";
}

def Graph_ReshapeOp : Graph_Op<"reshape"> {
  let summary = "row-major reshape to the result type";
  let description = [{
    Reinterprets the elements in row-major order with the shape of the
    result type; the element counts must agree.

    ```mlir
    %r = graph.reshape %x : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
    ```
  }];
  let arguments = (ins Graph_AnyTensor:$input);
  let results = (outs Graph_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_SliceOp : Graph_InferredOp<"slice"> {
  let summary = "static slice with unit strides";
  let description = [{
    Keeps `[starts[d], limits[d])` of every dimension `d`, of a float or
    integer tensor.

    ```mlir
    %q = graph.slice %qkv starts [0, 0, 0] limits [2, 16, 64]
        : (tensor<2x16x192xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Graph_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits);
  let results = (outs Graph_AnyTensor:$result);
  let assemblyFormat = [{
    $input `starts` $starts `limits` $limits attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_ConcatOp : Graph_InferredOp<"concat"> {
  let summary = "concatenates tensors along one axis";
  let description = [{
    ```mlir
    %c = graph.concat %a, %b axis = 1
        : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$inputs `axis` `=` $axis attr-dict `:` functional-type(operands, results)";
}

def Graph_EmbeddingOp : Graph_InferredOp<"embedding"> {
  let summary = "looks up rows of a table";
  let description = [{
    `table` is `[V, H]`, `indices` any shape of int64 in `[0, V)`; the result
    is `indices.shape + [H]`. An index out of range is a run-time error.

    ```mlir
    %e = graph.embedding %wte, %tokens
        : (tensor<128x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$table, Graph_IndexTensor:$indices);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$table `,` $indices attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

def Graph_CausalMaskOp
    : Graph_Op<"causal_mask", [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "masks attention scores above the diagonal";
  let description = [{
    For scores `[..., Sq, Sk]` with `Sq == Sk`, element `(i, j)` becomes
    `-inf` where `j > i` (a query never sees a later key) and is unchanged
    elsewhere; a following softmax gives those positions exactly 0.
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Graph_CrossEntropyOp : Graph_InferredOp<"cross_entropy"> {
  let summary = "softmax cross-entropy summed over positions";
  let description = [{
    `logits` is `[..., C]`, `targets` is int64 `[...]` with values in
    `[0, C)`; the result is the scalar sum over all positions of
    `-log_softmax(logits)[target]`. A mean is this times a constant `1/N`:
    a sum of a batch split over devices is a partial sum (`P(sum)`), a mean
    would not be.

    ```mlir
    %loss = graph.cross_entropy %logits, %targets
        : (tensor<2x16x128xf32>, tensor<2x16xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IndexTensor:$targets);
  let results = (outs 0DTensorOf<[F32, BF16]>:$loss);
  let assemblyFormat =
      "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Gradients: what autodiff emits for ops whose adjoint is not a composition
// of the forward ops above
//===----------------------------------------------------------------------===//

class Graph_PointwiseGradOp<string mnemonic, string formula>
    : Graph_InferredOp<mnemonic> {
  let summary = "gradient of " # !subst("_grad", "", mnemonic);
  let description = "Computes `" # formula # "` for every element.";
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$grad);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $grad attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferGradLike<$cppClass>(loc, "input", adaptor.getInput(), adaptor.getGrad(), types);
    }
  }];
}

def Graph_ReluGradOp : Graph_PointwiseGradOp<"relu_grad", "grad if input > 0 else 0">;
def Graph_GeluGradOp : Graph_PointwiseGradOp<"gelu_grad",
    "grad * gelu'(input)` with `gelu` the tanh form of `graph.gelu">;

def Graph_SoftmaxGradOp : Graph_InferredOp<"softmax_grad"> {
  let summary = "gradient of softmax, from its output";
  let description = [{
    With `output = softmax(x)` along `axis`, computes the gradient with
    respect to `x`: `output * (grad - sum(grad * output, axis))`.
  }];
  let arguments = (ins Graph_FloatTensor:$output, Graph_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$output `,` $grad `axis` `=` $axis attr-dict `:` functional-type(operands, results)";
}

def Graph_LayerNormGradOp : Graph_InferredOp<"layer_norm_grad"> {
  let summary = "gradients of layer_norm with respect to input, scale and bias";
  let description = [{
    For `y = layer_norm(input, scale, bias, eps)` over the last dimension
    and the gradient `grad` of `y`, returns the gradients of `input`,
    `scale` and `bias` (the last two summed over all rows).

    ```mlir
    %dx, %dscale, %dbias = graph.layer_norm_grad %x, %g, %dy eps = 1.0e-05
        : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x64xf32>)
        -> (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Graph_FloatTensor:$input_grad, Graph_FloatTensor:$scale_grad,
                      Graph_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad `eps` `=` $eps attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_EmbeddingGradOp : Graph_InferredOp<"embedding_grad"> {
  let summary = "gradient of embedding with respect to the table";
  let description = [{
    Scatters `grad` (`indices.shape + [H]`) into a zero `[rows, H]` table,
    adding the rows of repeated indices.

    ```mlir
    %dwte = graph.embedding_grad %tokens, %de rows = 128
        : (tensor<2x16xi64>, tensor<2x16x64xf32>) -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Graph_IndexTensor:$indices, Graph_FloatTensor:$grad, I64Attr:$rows);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad `rows` `=` $rows attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_CausalMaskGradOp
    : Graph_Op<"causal_mask_grad", [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "gradient of causal_mask";
  let description = [{
    Passes `grad` through where `graph.causal_mask` kept the score
    (`j <= i`) and gives 0 where it masked (`j > i`).
  }];
  let arguments = (ins Graph_FloatTensor:$grad);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

def Graph_CrossEntropyGradOp : Graph_InferredOp<"cross_entropy_grad"> {
  let summary = "gradient of cross_entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(targets)) * loss_grad`, where `loss_grad`
    is the scalar gradient of the summed loss.

    ```mlir
    %dlogits = graph.cross_entropy_grad %logits, %targets, %dloss
        : (tensor<2x16x128xf32>, tensor<2x16xi64>, tensor<f32>) -> tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IndexTensor:$targets,
                       0DTensorOf<[F32, BF16]>:$loss_grad);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $loss_grad attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_PadOp : Graph_InferredOp<"pad"> {
  let summary = "pads with zeros (the adjoint of slice)";
  let description = [{
    Adds `low[d]` zeros before and `high[d]` zeros after dimension `d`.

    ```mlir
    %p = graph.pad %x low [0, 1] high [0, 2] : (tensor<2x3xf32>) -> tensor<2x6xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `low` $low `high` $high attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_BroadcastOp : Graph_Op<"broadcast"> {
  let summary = "NumPy broadcast to the result type (the adjoint of reduce_sum)";
  let description = [{
    ```mlir
    %b = graph.broadcast %x : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

def Graph_SgdUpdateOp : Graph_InferredOp<"sgd_update"> {
  let summary = "one step of SGD with momentum and weight decay";
  let description = [{
    As PyTorch's `torch.optim.SGD` (no dampening, not Nesterov):
    `velocity' = momentum * velocity + (grad + weight_decay * param)`,
    `param' = param - lr * velocity'`. Returns `(param', velocity')`.

    ```mlir
    %w1, %v1 = graph.sgd_update %w, %dw, %v lr = 1.0e-01 momentum = 9.0e-01 weight_decay = 0.0
        : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$param, Graph_F32Tensor:$grad,
                       Graph_F32Tensor:$velocity, F64Attr:$lr, F64Attr:$momentum,
                       F64Attr:$weight_decay);
  let results = (outs Graph_F32Tensor:$new_param, Graph_F32Tensor:$new_velocity);
  let assemblyFormat = [{
    $param `,` $grad `,` $velocity `lr` `=` $lr `momentum` `=` $momentum
    `weight_decay` `=` $weight_decay attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_AdamwUpdateOp : Graph_InferredOp<"adamw_update"> {
  let summary = "one step of AdamW";
  let description = [{
    As PyTorch's `torch.optim.AdamW`, with `step` the 1-based step number:
    `param *= 1 - lr * weight_decay`; `m' = beta1 m + (1 - beta1) grad`;
    `v' = beta2 v + (1 - beta2) grad^2`;
    `param' = param - lr * (m' / (1 - beta1^step)) / (sqrt(v' / (1 - beta2^step)) + eps)`.
    Returns `(param', m', v')`.

    ```mlir
    %w1, %m1, %v1 = graph.adamw_update %w, %dw, %m, %v, %step lr = 1.0e-03 beta1 = 9.0e-01
        beta2 = 9.990000e-01 eps = 1.0e-08 weight_decay = 1.0e-02
        : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<f32>)
        -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$param, Graph_F32Tensor:$grad, Graph_F32Tensor:$m,
                       Graph_F32Tensor:$v, 0DTensorOf<[F32]>:$step, F64Attr:$lr,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Graph_F32Tensor:$new_param, Graph_F32Tensor:$new_m,
                      Graph_F32Tensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $step `lr` `=` $lr `beta1` `=` $beta1 `beta2` `=` $beta2
    `eps` `=` $eps `weight_decay` `=` $weight_decay attr-dict `:` functional-type(operands, results)
  }];
}

#endif // SBPC_GRAPH_OPS
