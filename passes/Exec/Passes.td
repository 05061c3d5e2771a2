//===- Passes.td - exec passes -----------------------------*- tablegen -*-===//

#ifndef SBPC_EXEC_PASSES
#define SBPC_EXEC_PASSES

include "mlir/Pass/PassBase.td"

def ExecPlanMemory : Pass<"exec-plan-memory", "mlir::ModuleOp"> {
  let summary = "assigns every local tensor a static place in one arena per rank";
  let description = [{
    In each exec program, a value lives from the op that makes it to its
    last use; the scratch memory a collective needs lives during that op
    only. An op's results never share memory with its operands, except a
    `graph.reshape`'s, which takes its input's place (the same bytes in the
    same order; no value is written after its op), the place then living
    until the last use of either. Two plans place them at 64-byte aligned
    offsets where nothing live at the same time overlaps: in program order,
    each at the lowest free offset (first fit, as a program makes and frees
    them); and largest first, each in the smallest gap the blocks already
    placed leave while it lives (greedy by size, as Pisarchyk and Lee's
    offline planner), which leaves fewer holes (up to 15% less arena on the
    tests' GPTs). `placement=smaller` (the default) takes the smaller
    (largest first only up to 40,000 blocks a program: it is quadratic);
    `in-order` or `largest-first` takes that one. Sets `exec.offsets` (one
    per result) and `exec.scratch_offset` on ops and `exec.arena_bytes`
    (the highest byte any of them reaches) on the program: the rank
    allocates exactly that, once.

    A parameter's update stored under the parameter's name (a training
    step's, whole, in the parameter's type, global shape and layout, not a
    partial sum; the parameter loaded once, the update made by an op, not
    loaded) takes the parameter's place
    where the parameter is dead before the update is made, or where the op
    that makes it is an optimizer's update (`graph.sgd_update`,
    `graph.adamw_update`: each element read before it is written) of that
    parameter or state; the place then lives through the whole program, and
    the load and the store are marked `exec.resident`: a rank running
    several steps (`--steps`) finds the update where the next step's load
    reads, and copies nothing.

    ```mlir
    %0 = exec.load "input" "x" global [8, 4] [S(0)] {exec.offsets = array<i64: 0>}
        : tensor<4x4xf32>
    ```
  }];
  let options = [
    Option<"placement", "placement", "std::string", /*default=*/"\"smaller\"",
           "smaller (of the two plans), in-order or largest-first">,
  ];
}

def ExecBf16 : Pass<"exec-bf16", "mlir::ModuleOp"> {
  let summary = "computes in bf16, keeps the parameters' updates in f32 (--precision bf16)";
  let description = [{
    In each exec program, every op that depends on an input (the forward
    and the backward: activations, their gradients, the parameters'
    gradients, the loss) or that only they use (a parameter loaded for the
    forward alone) makes bf16 values, and the kernels read them as f32,
    compute in f32 or wider and round once on the write. What an optimizer
    update or a stored output needs without depending on an input stays
    f32: the parameters the update reads, its state (moments, velocity,
    step), the update itself and the new values on their way to their
    stores. Sums over micro-batches (`graph.accumulate` adds) stay f32 too,
    so gradient accumulation does not round at every micro-batch. Where the
    two meet, an `exec.convert` is made once, right after
    the value: a parameter's bf16 copy for the forward and the backward, a
    gradient's f32 copy for the update, a constant's bf16 copy. Loads of
    bf16 values round the file's f32 as they read; stores write f32.
    Collectives then move half the bytes and the memory plan gives the
    values half the space. A message between pipeline stages (programs
    marked `sbp.stage`) is bf16 unless the sender keeps its value in f32 (a
    sum of gradients that the other stage's update reads): then the
    `exec.send` and its `exec.recv` (the same stages and tag, the same place
    among the messages of that tag between them) both stay f32;
    messages of programs without a stage are bf16. Run before --exec-fuse
    and --exec-plan-memory.

    ```mlir
    // training: the weight stays f32 for adamw, a bf16 copy feeds the matmul
    %w = exec.load "param" "w" global [8, 4] [B] : tensor<8x4xf32>
    %wb = exec.convert %w : tensor<8x4xf32> to tensor<8x4xbf16>
    %y = graph.matmul %x, %wb : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
    ```
  }];
  let dependentDialects = ["::sbpc::exec::ExecDialect"];
}

def ExecFuse : Pass<"exec-fuse", "mlir::ModuleOp"> {
  let summary = "groups elementwise chains into exec.fused ops, attention's softmax into "
                "exec.softmax and its products into exec.causal_matmul (bf16 attention into "
                "exec.attention and exec.attention_grad), linear layers into "
                "exec.linear and their gradients into exec.matmul_gelu_grad and "
                "exec.matmul_bias_grad";
  let description = [{
    In each exec program, first: a `graph.add` of a bias `[N]` to a
    `graph.matmul` by a shared `[K, N]` or `[N, K]` weight (the input not
    transposed, the product used only there) becomes one `exec.linear`,
    which takes the `graph.gelu` after the sum too (where the sum has other
    uses, training's `graph.gelu_grad`, the linear layer's second result,
    its preactivation, takes them): the GPU adds the bias and applies the
    GELU in cuBLASLt's epilogue, as the product is written. Linear layers
    on one input whose
    weights are the slices `w[:, g, :]` of one `[K, G, N]` weight and whose
    biases the slices `b[g, :]` of one `[G, N]` bias, every g once (GPT's
    query, key and value, sliced so that tensor parallelism splits heads),
    then become one `exec.linear` by the whole weight seen as `[K, G * N]`
    and slices of its product: one GEMM G times as wide. A `graph.add` of
    an exec.linear's result (its only use, no GELU) and a tensor of the
    same type, a residual connection, joins the linear layer as its
    `residual` (cuBLASLt's C with beta = 1). The backward's linear layers:
    `graph.gelu_grad(pre, matmul(dy, w))`, a product by a shared weight
    used only there, becomes one `exec.matmul_gelu_grad`, with a
    `graph.reduce_sum` of its result over every axis but the last (the
    bias gradient of the layer before the GELU) as its second result; a
    `graph.matmul` of two rank-2 operands with the lhs transposed (a
    weight's gradient) whose rhs is, or reshapes, a gradient that a
    `graph.reduce_sum` sums over every axis but the last (its bias's
    gradient) becomes one `exec.matmul_bias_grad` where the first of the
    two was (later reshapes it reads are copied there; where an operand
    comes later otherwise, nothing fuses). Next, a
    `graph.softmax` over the last axis whose
    input is a `graph.causal_mask` or a `graph.mul` by a 0-d scale, or a
    mask of such a mul, each used only there, becomes one `exec.softmax`;
    `graph.softmax_grad` over the last axis followed by
    `graph.causal_mask_grad` or a mul by a scale or both becomes one
    `exec.softmax_grad`. Attention's scores are then read once and written
    once each way instead of three times. In bf16 (with `attention`, the
    default), an `exec.softmax` (or a `graph.softmax` over the last axis)
    of `graph.matmul(q, k)` with `k` transposed whose probabilities only
    `graph.matmul(p, v)` reads, each product batched over the same leading
    dimensions, the head's width even and at most 128 and v's the same,
    becomes one `exec.attention`: the scores never reach memory (flash
    attention on the GPU). A training step's backward of such attention
    (the probabilities' gradient `ds`, one `exec.softmax_grad`, or a
    `graph.softmax_grad` over the last axis, of the same softmax) becomes
    one `exec.attention_grad`, and its forward one `exec.attention` with
    the log-sum-exp as a second result, where nothing else reads what
    they compute on the way: the scores only the softmax, the
    probabilities only the product by v, `matmul(p^T, dO)` and `ds` (or,
    with the forward an `exec.attention` already, the probabilities
    recomputed for the backward, only the last two), `ds`'s other operand
    `matmul(dO, v^T)` only `ds`, and `ds` only `matmul(ds, k)` and
    `matmul(ds^T, q)`. Then a `graph.matmul` by a
    causal `exec.softmax`'s or `exec.softmax_grad`'s result (0 above the
    diagonal: `p v`, `p^T dO`, `ds k`, `ds^T q`) becomes an
    `exec.causal_matmul ... lower_lhs`, and one whose result only causal
    `exec.softmax` inputs and `exec.softmax_grad` gradients read (`q k^T`,
    `dO v^T`) an `exec.causal_matmul ... lower_result`: the runtimes
    compute each in row blocks, as far as the diagonal, about half the
    work. Then an elementwise graph op (neg, exp, log, tanh,
    sqrt, rsqrt, relu, gelu, add, sub, mul, div, relu_grad, gelu_grad)
    whose result feeds only one other elementwise op, with the same type,
    joins that op's chain; each chain of two or more ops becomes one
    `exec.fused` whose inputs are what the chain reads from outside (bias
    vectors and scalars broadcast). The emitters make one loop or one
    kernel of it, so the intermediate values take neither memory bandwidth
    nor arena space. Run before --exec-plan-memory.

    ```mlir
    // graph.matmul %x, %w, graph.add of %b, then graph.gelu become
    %h = exec.linear %x, %w, %b gelu
        : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    // graph.add %x, %b then graph.gelu (%x no product) become
    %y = exec.fused(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %0 = graph.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %1 = graph.gelu %0 : tensor<4x8xf32>
      exec.yield %1 : tensor<4x8xf32>
    }
    ```
  }];
  let options = [
    Option<"attention", "attention", "bool", /*default=*/"true",
           "bf16 attention (scores, softmax, product by the values) into exec.attention, "
           "its backward into exec.attention_grad">,
  ];
  let dependentDialects = ["::sbpc::exec::ExecDialect"];
}

#endif // SBPC_EXEC_PASSES
