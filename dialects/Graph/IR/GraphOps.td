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

def Graph_F32Tensor : StaticShapeTensorOf<[F32]>;
def Graph_IndexTensor : StaticShapeTensorOf<[I64]>;
def Graph_AnyTensor : StaticShapeTensorOf<[F32, I64]>;

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, !listconcat(traits, [Pure])>;

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
  let results = (outs Graph_AnyTensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$input);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$lhs, Graph_F32Tensor:$rhs);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$lhs, Graph_F32Tensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdims);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$input, I64Attr:$axis);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$input, Graph_F32Tensor:$scale,
                       Graph_F32Tensor:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_F32Tensor:$result);
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
    Keeps `[starts[d], limits[d])` of every dimension `d`.

    ```mlir
    %q = graph.slice %qkv starts [0, 0, 0] limits [2, 16, 64]
        : (tensor<2x16x192xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Variadic<Graph_F32Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$table, Graph_IndexTensor:$indices);
  let results = (outs Graph_F32Tensor:$result);
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
  let arguments = (ins Graph_F32Tensor:$input);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Graph_CrossEntropyOp : Graph_InferredOp<"cross_entropy"> {
  let summary = "mean softmax cross-entropy over class logits";
  let description = [{
    `logits` is `[..., C]`, `targets` is int64 `[...]` with values in
    `[0, C)`; the result is the scalar mean over all positions of
    `-log_softmax(logits)[target]`.

    ```mlir
    %loss = graph.cross_entropy %logits, %targets
        : (tensor<2x16x128xf32>, tensor<2x16xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$logits, Graph_IndexTensor:$targets);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat =
      "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
}

#endif // SBPC_GRAPH_OPS
