//===- GraphDialect.td - the graph dialect ----------------*- tablegen -*-===//
//
// The model as the user wrote it: global shapes, value semantics, no layouts.
//
//===----------------------------------------------------------------------===//

#ifndef SBPC_GRAPH_DIALECT
#define SBPC_GRAPH_DIALECT

include "mlir/IR/OpBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::sbpc::graph";
  let summary = "Deep-learning model graphs on ranked tensors with global shapes";
  let description = [{
    The `graph` dialect describes a model the way a user thinks of it: whole
    (global) tensors with static shapes, value semantics, and NumPy as the
    reference semantics. It carries no layout and no device: those are added
    by the `sbp` dialect and the passes that follow.

    A model is a `func.func` whose arguments are marked as parameters or
    inputs and whose results are named outputs:

    ```mlir
    func.func @mlp(%x: tensor<8x32xf32> {graph.input = "x"},
                   %w: tensor<32x16xf32> {graph.param = "fc0.weight"})
        -> (tensor<8x16xf32> {graph.output = "logits"}) {
      %y = graph.matmul %x, %w : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
      return %y : tensor<8x16xf32>
    }
    ```

    Argument and result attributes:
    - `graph.param = "name"`: a trained parameter, loaded by name from a
      `.safetensors` file (names follow the Hugging Face layout where a model
      has a Hugging Face twin).
    - `graph.param_shape = array<i64: ...>`: the shape the parameter has in
      the file when the graph views it with another shape of the same size
      (a row-major reshape, e.g. GPT-2's `c_attn.weight` stored as [H, 3H]
      and viewed as [H, 3, H] so that it can be split by heads). On a
      result, the shape its file gets: a gradient, an updated parameter or
      an optimizer state of such a parameter is computed and laid out in the
      view's shape and written in the stored one (the same bytes).
    - `graph.input = "name"`: a model input, read from `name=FILE.npy`.
    - `graph.output = "name"`: a model result, written to `name.npy`.

    Op attributes (optional, for recomputation, `--graph-autodiff`):
    - `graph.region = "name"`: the op belongs to a block of the model (a
      transformer layer): with `recompute=full` the block's activations are
      recomputed in the backward pass instead of kept.
    - `graph.selective`: the op is cheap to recompute but its results are
      large (attention scores and probabilities): with
      `recompute=selective` only these are recomputed, per block.

    Op attributes that passes set:
    - `graph.accumulate`: a `graph.add` that sums a result over micro-batches
      (`--sbp-micro-batches`: a gradient, the loss); `--exec-bf16` keeps it
      in f32, so gradient accumulation does not round at every micro-batch.
    - `graph.backward`: an op of the backward pass (`--graph-autodiff` marks
      every op it makes, recomputed ones included; `--graph-optimizer` its
      step counter's increment); `--sbp-pipeline` places
      the forward ops on stages and the backward ones beside the forward
      values they use.
  }];
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr ::llvm::StringLiteral kParamAttr = "graph.param";
    static constexpr ::llvm::StringLiteral kParamShapeAttr = "graph.param_shape";
    static constexpr ::llvm::StringLiteral kInputAttr = "graph.input";
    static constexpr ::llvm::StringLiteral kOutputAttr = "graph.output";
    static constexpr ::llvm::StringLiteral kRegionAttr = "graph.region";
    static constexpr ::llvm::StringLiteral kSelectiveAttr = "graph.selective";
    static constexpr ::llvm::StringLiteral kAccumulateAttr = "graph.accumulate";
    static constexpr ::llvm::StringLiteral kBackwardAttr = "graph.backward";
  }];
}

#endif // SBPC_GRAPH_DIALECT
