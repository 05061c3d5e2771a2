//===- Passes.td - graph passes ----------------------------*- tablegen -*-===//

#ifndef SBPC_GRAPH_PASSES
#define SBPC_GRAPH_PASSES

include "mlir/Pass/PassBase.td"

def GraphAutodiff : Pass<"graph-autodiff", "mlir::ModuleOp"> {
  let summary = "adds the gradient of the loss with respect to every parameter";
  let description = [{
    For each function with a result named `loss` (`graph.output`; the
    `loss` option names another), a scalar f32, builds the backward graph by
    reverse-mode differentiation: each op's gradient rule
    (`GradientOpInterface`, beside the op's definition) turns the gradients
    of its results into those of its operands; gradients of a value used
    several times are added. Only ops on a path from a parameter to the
    loss are differentiated. The function then also returns, for every
    parameter `P` (`graph.param`), its gradient as output `grad.P` (zeros
    when the loss does not depend on it), in argument order, typed as the
    parameter; one stored in another shape (`graph.param_shape`) gets the
    same attribute on its gradient, which is written in that shape. A
    function that already has an output named `grad.*` is refused (the
    names are the pass's: `--graph-optimizer` finds gradients by them).

    ```mlir
    func.func @f(%w: tensor<4xf32> {graph.param = "w"}, %x: tensor<4xf32> {graph.input = "x"})
        -> (tensor<f32> {graph.output = "loss"}) { ... }
    // becomes
    func.func @f(...) -> (tensor<f32> {graph.output = "loss"},
                          tensor<4xf32> {graph.output = "grad.w"})
    ```
    An op without a gradient rule on that path (`reduce_max`, a gradient
    op) is an error at the op.

    `recompute=full` trades compute for memory: for every block of the
    model (ops marked `graph.region = "NAME"`), the forward ops whose
    results the backward pass uses are cloned just before the first
    backward op that needs them, and the backward pass uses the clones; the
    forward results then die in the forward pass, and only the block's
    checkpoints (what it takes from outside and what it hands on to forward
    ops outside it) stay live until its backward. `recompute=selective`
    does this only for the ops also marked `graph.selective` (attention's
    scores and probabilities: large and cheap to recompute). `sbpc gen`
    marks each GPT layer and each MLP layer, and the attention core.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"loss\"",
           "The graph.output name of the scalar to differentiate">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "none, full (each graph.region) or selective (its graph.selective ops)">,
  ];
  let dependentDialects = ["::sbpc::graph::GraphDialect"];
}

def GraphOptimizer : Pass<"graph-optimizer", "mlir::ModuleOp"> {
  let summary = "turns parameter gradients into one optimizer step";
  let description = [{
    After `--graph-autodiff`, replaces each `grad.P` output by one update
    of parameter `P` (`graph.sgd_update` or `graph.adamw_update`, PyTorch's
    semantics) and adds the optimizer's state as parameters: SGD's
    `optimizer.velocity.P`, AdamW's `optimizer.m.P`, `optimizer.v.P` and the
    shared 1-based `optimizer.step` (a function that already uses an
    `optimizer.*` name is refused). The function then returns, besides its
    other results, the new value of every parameter and state under the
    parameter's own name, typed as the parameter and written in its stored
    shape (`graph.param_shape` on the result where the parameter has one,
    so that a tensor-parallel step keeps the view's layout to the end): one
    training step, whose outputs are the next step's parameters (`sbpc run
    --steps`).
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"", "sgd or adamw">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0", "Weight decay">,
  ];
  let dependentDialects = ["::sbpc::graph::GraphDialect"];
}

#endif // SBPC_GRAPH_PASSES
