//===- Passes.td - SBP passes ------------------------------*- tablegen -*-===//

#ifndef SBPC_SBP_PASSES
#define SBPC_SBP_PASSES

include "mlir/Pass/PassBase.td"

def SbpPropagate : Pass<"sbp-propagate", "mlir::ModuleOp"> {
  let summary = "gives every value an nd-SBP layout, starting from seeds";
  let description = [{
    Walks each function in order and gives every op the signature (a layout
    per operand and result, see SbpOpInterface) most consistent with the
    layouts its operands already have: the least boxing time to bring each
    operand into the required layout, then the least compute time on the
    local shapes.
    Seeds are `sbp.constraint` ops and `sbp.layout` argument attributes; an
    argument without a seed takes the layout its first consumer wants, at
    no cost. A constraint's result has the pinned layout: an operand laid
    out otherwise is boxed into it (insert-boxing makes that explicit), so
    differing pins are conversions, not conflicts. Seeds that cannot hold
    (a layout that does not fit its tensor, a partial layout on indices, an
    existing boxing whose source disagrees with its operand) and ops with no
    legal signature are errors naming the op or argument and the layouts.
    The choice is deterministic (ties go to the first signature). In a
    micro-batched step (`sbp.micro_batch`) an op of a later micro-batch
    that has the same candidates as the same op of micro-batch 0 and finds
    its operands laid out alike takes that op's choice without ranking its
    candidates again: it would choose the same.

    Before:
    ```mlir
    sbp.mesh @m axes ["dp"] shape [2]
    func.func @f(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
      %xs = sbp.constraint %x mesh @m [S(0)] : tensor<8x4xf32>
      %y = graph.matmul %xs, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
      return %y : tensor<8x4xf32>
    }
    ```
    After: the function gets `sbp.mesh = @m`, `%x` gets `sbp.layout =
    #sbp.nd<[S(0)]>`, `%w` `#sbp.nd<[B]>`, and the matmul
    `sbp.operand_layouts = [#sbp.nd<[S(0)]>, #sbp.nd<[B]>]`,
    `sbp.result_layouts = [#sbp.nd<[S(0)]>]`.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"cpu\"",
           "Cluster preset name or JSON file for the cost model">,
  ];
  let dependentDialects = ["::sbpc::sbp::SbpDialect"];
}

def SbpSearch : Pass<"sbp-search", "mlir::ModuleOp"> {
  let summary = "chooses every layout by a search over the cost model";
  let description = [{
    Like `--sbp-propagate`, gives every op a signature and every argument a
    layout, but chooses them together to minimize the estimated step time:
    the compute of every op on its local shapes plus the α-β time of every
    boxing (docs/search.md). Arguments with an `sbp.layout` keep it;
    `sbp.constraint` ops are kept and pinned.

    - `algorithm=exact`: the optimum, by variable elimination over the
      layouts of values; fails on graphs whose tables outgrow its budget.
    - `algorithm=drec`: MindSpore's double-recursive search, a baseline.
    - `algorithm=auto`: exact where the graph allows it, otherwise the best
      of D-Rec and an axis-by-axis exact solve improved until nothing
      improves; re-solves with a price on memory until the plan fits the
      cluster's device memory (`memory-check=false` skips that). With
      `stages`, the plan is for a pipeline of that many stages, each
      holding part of it: the check is of the fullest stage of the cut
      `--sbp-pipeline` will make (its code, on whole blocks), each block
      holding its arguments, the rest of the step in proportion to them,
      and what its forward leaves for the backward (its stash) once for
      every micro-batch its chunk holds at once under `schedule` (1F1B:
      min(stages - s, micro-batches) on stage s; interleaved with
      `chunks` chunks a stage: what its chunks hold together at each
      moment; GPipe: all of them; sequential: one); what the backward has live at the peak but
      parameters' gradients (one block's working set, which every stage
      has: what it made and the copies it made to read, such as weights
      ZeRO-3 gathers) counts whole. The cut is by time, or where that would not fit,
      the fastest cut that fits, else the leanest; with `starts`, the cut
      by hand those blocks begin. With fewer blocks than
      chunks, shares of the plan stand in (1/stages, the first stage's
      micro-batches; cut for memory, shares that make the stages as full
      as each other). An estimate before the cut: the report's per-stage
      peaks are those of the stages as cut.

    With `zero`, every plan is costed as `--sbp-zero` at that stage will
    make it, time and memory: the updates split on the data-parallel axes
    (those the plan splits the batch on; the search solves again while
    its plan's differ from those it assumed), each micro-batch's gradient
    reduce-scattered from stage 2, at stage 3 the parameters stored split
    and gathered before each use.

    In a micro-batched step (`--sbp-micro-batches`) each op of a later
    micro-batch is laid out as the same op of micro-batch 0, which the
    search chooses for all of them at once (`micro-batch-ties=false`:
    each on its own).

    The function gets `sbp.search`, a dictionary with the algorithm, the
    candidates evaluated, the plan's estimated seconds and the tied
    micro-batch copies; every op with
    more than one choice gets `sbp.runner_up`: its cheapest other signature
    with the rest of the plan fixed, and the plan's seconds with it.
  }];
  let options = [
    Option<"algorithm", "algorithm", "std::string", /*default=*/"\"auto\"",
           "auto, drec or exact">,
    Option<"cluster", "cluster", "std::string", /*default=*/"\"cpu\"",
           "Cluster preset name or JSON file for the cost model">,
    Option<"memoryCheck", "memory-check", "bool", /*default=*/"true",
           "auto: reject plans that do not fit the device memory">,
    Option<"microBatchTies", "micro-batch-ties", "bool", /*default=*/"true",
           "lay out every micro-batch's copy of an op as micro-batch 0's">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "the --sbp-zero stage to follow: plans are costed as it will make them">,
    Option<"stages", "stages", "int64_t", /*default=*/"1",
           "pipeline stages the plan will be cut into (--sbp-pipeline): the memory check "
           "estimates the fullest stage of the cut the pass will make">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "the --sbp-pipeline schedule the stages will run (1f1b, interleaved, gpipe or "
           "sequential): how many micro-batches' activations each stage holds at once">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "under schedule=interleaved, the model chunks each stage will hold (at least 2)">,
    ListOption<"starts", "starts", "std::string",
               "the blocks that begin stages 1, 2, ... where --sbp-pipeline cuts by hand "
               "(its starts): the memory check is of that cut (none: of the cut the pass "
               "makes, by time or for memory)">,
    Option<"cutForMemory", "cut-for-memory", "bool", /*default=*/"true",
           "without starts: --sbp-pipeline cuts for memory where a cut by time would not fit "
           "(its balance-memory); false: the memory check is of the cut by time">,
    Option<"memoryShare", "memory-share", "double", /*default=*/"1.0",
           "auto: the share of the device's memory a plan may need by the search's estimate "
           "(sbpc compile lowers it once where a pipeline's stages as cut do not fit)">,
  ];
  let dependentDialects = ["::sbpc::sbp::SbpDialect"];
}

def SbpInsertBoxing : Pass<"sbp-insert-boxing", "mlir::ModuleOp"> {
  let summary = "makes every change of layout an explicit sbp.boxing";
  let description = [{
    After `--sbp-propagate`, wherever a value's layout differs from the
    layout its consumer's signature needs, inserts an `sbp.boxing` with the
    cheapest plan's collectives, mesh axes and bytes per rank, and the
    reason: the consumer, its location and the operand. `sbp.constraint`
    ops become boxings where their operand is laid out otherwise, and
    disappear where it already is. A training step's new parameters and
    optimizer states (an optimizer update's results) go back to the layouts
    their arguments are stored in, as soon as they are made: where ZeRO-1
    or 2 split an update, the new parameter is all-gathered
    (`reason = "the next step reads 'NAME' as stored, [B]"`).

    In a module marked `sbp.precision = "bf16"` (`sbpc compile --precision
    bf16`), a boxing whose consumer will read the value in bf16 (the rule of
    `--exec-bf16`: everything but what the optimizer's updates and the
    stored parameters need) is planned for 2-byte elements and marked
    `sbp.bf16`; one that feeds the updates keeps 4-byte elements.

    ```mlir
    %0 = sbp.boxing %y mesh @m from [P(sum)] to [B] {bytes_per_rank = 96 : i64,
        collective = "all-reduce", mesh_axes = ["tp"],
        reason = "consumer 'graph.gelu' at m.mlir:7:8 needs [B] for operand 0"}
        : tensor<8x4xf32>
    ```
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"cpu\"",
           "Cluster preset name or JSON file for the cost model">,
  ];
  let dependentDialects = ["::sbpc::sbp::SbpDialect"];
}

def SbpMicroBatches : Pass<"sbp-micro-batches", "mlir::ModuleOp"> {
  let summary = "runs each function on micro-batches of its inputs and combines the results";
  let description = [{
    Gradient accumulation, before a mesh is chosen (after
    `--graph-autodiff`, before `--graph-optimizer`): each function's body
    runs `count` times, on micro-batch `i` of every `graph.input` (rows `i`,
    `i + count`, ... of dimension 0, the batch), one micro-batch's forward
    and backward after the other, and each result is combined as soon as a
    micro-batch has it (a sum, right after the op that makes the term). How to combine follows from the SBP rules: the
    function is laid out (on a copy) over a mesh axis of `count` with the
    inputs `S(0)` and the parameters `B`; a result that comes out `P(sum)`
    (a loss summed over examples and scaled by the whole batch, every
    gradient) is the sum over micro-batches, an `S(0)` one (logits) is
    their rows back in order, a `B` one is any micro-batch's. The ops that
    join rows are marked `sbp.output_join`: where the pieces are laid out
    as the result, `--sbp-spmdize` stores each piece as soon as it is made
    and drops the join. An op that
    would need data from another micro-batch (a boxing in that layout), or
    a result laid out otherwise, is an error.

    ```mlir
    // count=2, x: tensor<4x8xf32>: micro-batch 1 is rows 1 and 3
    %g = graph.reshape %x : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
    %s = graph.slice %g starts [0, 1, 0] limits [2, 2, 8]
        : (tensor<2x2x8xf32>) -> tensor<2x1x8xf32>
    %x1 = graph.reshape %s : (tensor<2x1x8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let options = [
    Option<"count", "count", "int64_t", /*default=*/"1", "Number of micro-batches">,
  ];
  let dependentDialects = ["::sbpc::sbp::SbpDialect", "::sbpc::graph::GraphDialect"];
}

def SbpZero : Pass<"sbp-zero", "mlir::ModuleOp"> {
  let summary = "ZeRO: shards optimizer updates, states, gradients and parameters on the data-parallel axes";
  let description = [{
    After `--sbp-propagate` (or `--sbp-search`) and before
    `--sbp-insert-boxing`, on a training step (`--graph-optimizer`). The
    data-parallel axes are the mesh axes on which an input's batch
    (dimension 0) is split. Every `graph.adamw_update` / `graph.sgd_update`
    whose parameter is `B` on such an axis is split there, `S(d)` along the
    parameter's largest dimension that divides, on all operands and results
    but AdamW's step count (after `--sbp-search`: every update that is `B`
    there, wherever the plan stores its parameter). Then, by `stage`:

    - 1: the optimizer states' arguments are laid out split (each rank
      loads and stores only its part); the gradient is still reduced whole
      (an `sbp.constraint` pins the layout the update wanted) and sliced;
    - 2: also the gradient is reduced straight into its slice (P(sum) to
      S(d), a reduce-scatter); in a micro-batched step each micro-batch's,
      the adds that accumulate them (`graph.accumulate`) taking S(d) too
      (also where the plan split the update on such an axis itself);
    - 3: also the parameter is stored split, and gathered before each use
      separately (`sbp.gather_per_use`), so the whole copy is live only
      around its consumer (also where the plan stores it split on such an
      axis itself).

    The new parameter and states are results laid out split. The function
    gets `sbp.zero`: the stage, the axes, how many updates were split and
    which parameters could not be (no dimension divides), and the bytes of
    parameters, reduced gradients and optimizer states each rank holds.
    Stage 0 changes nothing and only records those bytes.
  }];
  let options = [
    Option<"stage", "stage", "int64_t", /*default=*/"1", "ZeRO stage: 0, 1, 2 or 3">,
    Option<"cluster", "cluster", "std::string", /*default=*/"\"cpu\"",
           "Cluster preset name or JSON file for the cost model">,
  ];
  let dependentDialects = ["::sbpc::sbp::SbpDialect"];
}

def SbpPipelineStages : Pass<"sbp-pipeline", "mlir::ModuleOp"> {
  let summary = "places every op of a laid-out model on a pipeline stage";
  let description = [{
    After `--sbp-insert-boxing`, gives every op an `sbp.stage` (from 0) and
    the function `sbp.stages`. Each stage runs on its own sub-mesh of the
    function's mesh shape; a value keeps its layout on every stage, so one
    that crosses stages goes from each rank to the rank at the same
    coordinates of the other stage unchanged (`--sbp-spmdize` makes the
    sends and receives).

    - The forward ops are cut, in program order, into contiguous stages,
      none empty, whose slowest is as fast as can be (compute time by the
      cost model, on the ops' local shapes); a block of the model
      (`graph.region`, a transformer layer) goes whole. With micro-batches
      (`--sbp-micro-batches`), the first micro-batch is cut and the others
      follow it op for op. Forward ops computed from inputs and constants
      alone (a micro-batch's slice of an input, a mask) go to the lowest
      stage that reads them.
    - Unless `balance-memory=false`, where a stage of that cut would not
      fit the cluster's device memory by the cut's own estimate, the
      forward is cut instead into the fastest stages that each fit, or
      where none do the leanest. A block's estimate: its parameters, their
      optimizer states and gradient sums, and copies of them that several
      micro-batches read (held the whole step); what its forward leaves for
      the backward (the stash: activations, a parameter gathered for both)
      once per micro-batch its stage holds at once under the schedule (1F1B:
      S - s on stage s); and the backward's working set (the largest op's
      results three times, the gradients of the block's input and output,
      and a micro-batch's gradients of its parameters). A value the
      backward reads counts on the stage whose forward reads it, a
      parameter's states and gradient sum on the first that reads it.
      Stages fill from the last, which holds the fewest micro-batches.
      Under `interleaved` a stage's stash is counted at each moment of the
      schedule, its chunks' micro-batches in flight then (not each at its
      own most), and the chunks are bounded by a scale of 1/V of the device:
      the fastest cut over such scales whose every stage fits. The function
      records what the
      cut was made by and its estimates as `sbp.cut`.
    - Any other op (the backward, `graph.backward` or computed from it; sums
      over micro-batches; optimizer updates) goes where the forward values
      it reads all are (a value is where it is computed and where forward
      ops read it): among those stages, the one its backward operands come
      from, else the last. Without forward operands, the lowest stage its
      backward operands come from (gradients flow towards the first stage).
    - A sum over micro-batches whose every term adds two contributions made
      on different stages (the gradient of a parameter two stages read, as
      GPT-2's tied `wte`), each term laid out as the sum or boxed into its
      layout (ZeRO-2's reduce-scatter into the split sum), becomes a sum of
      each contribution on its own stage (each boxed as the term was) and
      one add of the two: the far stage sends its sum once rather than a
      term per micro-batch.
    - Boxings and constants go to the lowest stage of their users: a value
      is sent as it was computed and changed where it is needed.

    With micro-batches, the ops are then put in a pipeline schedule, so
    that the stages work on different micro-batches at once: `1f1b` (the
    default; PipeDream-Flush, as Megatron-LM) runs S - s - 1 forwards on
    stage s to fill the pipeline, then a forward and a backward in turn
    (stage s holds at most S - s micro-batches' activations); `gpipe` runs
    every forward, then every backward (M micro-batches' activations). Each
    op goes where its task starts in a simulation of the schedule (each
    stage's forward and backward of a micro-batch taking what the cost model
    says of micro-batch 0's), in a topological order; a sum over
    micro-batches or an update as soon as what it reads is ready, a boxing
    or a constant just before its first reader. Every rank meets its sends
    and collectives in this one order (`--sbp-spmdize` receives a value
    just before its first use). `sequential` keeps the
    micro-batches one after the other (the stages wait for each other). The
    function records the schedule as `sbp.schedule`.

    `interleaved` (Megatron-LM's interleaved 1F1B) with `chunks=V` cuts the
    forward into stages x V chunks instead, chunk c on stage c % stages
    (stage s holds chunks s, s + stages, ...), and places the rest by the
    chunks as above; each stage runs its micro-batches in groups of
    `stages` through its first chunk, then its next, the backwards the
    other way, after (stages - s - 1) * 2 + (V - 1) * stages forwards. The
    bubble is V times smaller than 1F1B's, for more messages and a first
    stage that holds more micro-batches' activations. The micro-batches
    must be a multiple of `stages`. The function records `sbp.chunks`.

    `starts=h.6,h.12,...` places the stages by hand instead: stage g + 1
    (chunk g + 1 under `interleaved`) begins with the block named by the
    g-th (a `graph.region`, in the forward's order); one per stage (chunk)
    after the first.

    A forward with fewer parts (blocks, and ops outside blocks that read
    parameters) than stages is refused. `stages=1` changes nothing.

    ```mlir
    %0 = graph.matmul %x, %w {sbp.stage = 0 : i64, ...}
    %1 = graph.gelu %0 {sbp.stage = 1 : i64, ...}
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1", "Number of pipeline stages">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "Order of the micro-batches' work: 1f1b, interleaved, gpipe or sequential">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "Under schedule=interleaved: model chunks per stage (at least 2)">,
    ListOption<"starts", "starts", "std::string",
               "By hand: the blocks (graph.region) that begin stages 1, 2, ... in order">,
    Option<"cluster", "cluster", "std::string", /*default=*/"\"cpu\"",
           "Cluster preset name or JSON file for the cost model">,
    Option<"balanceMemory", "balance-memory", "bool", /*default=*/"true",
           "Where the fastest cut would not fit the cluster's device memory, "
           "cut for the fastest that fits (false: by time alone)">,
  ];
}

def SbpSpmdize : Pass<"sbp-spmdize", "mlir::ModuleOp"> {
  let summary = "turns a laid-out model into one exec program per rank role";
  let description = [{
    After `--sbp-insert-boxing`, replaces the model function by an exec
    program (a function without arguments, `exec.ranks` listing the ranks
    that run it) on local shapes:

    - each argument becomes an `exec.load` of the rank's shard, named as
      the argument's `graph.param` / `graph.input`;
    - each op is cloned with the local shapes its signature gives (layout
      attributes dropped); an embedding's or cross-entropy's ids also get
      `exec.index_place` (their layout, and the slices and reshapes back to
      the input they come from), so that a rank names a bad id by its
      place in that input;
    - each `sbp.boxing` becomes, hop by hop, the collective on that hop's
      mesh axis (`exec.all_reduce`, `exec.all_gather`,
      `exec.reduce_scatter`, `exec.all_to_all`) or a local change
      (`exec.local_slice`, `exec.zero_pad`, `exec.keep_one`); hops on
      axes of one device vanish;
    - each result becomes an `exec.store` of the rank's shard, named as the
      result's `graph.output`.

    Inputs are loaded just before their first use and results stored just
    after they are computed, so that the memory plan counts them only while
    they are live; parameters (and optimizer states) are loaded first, as
    what a rank holds resident across steps.

    Ranks differ only by their mesh coordinates, which the program reads at
    run time, so one program serves every rank of a mesh.

    ```mlir
    %0 = exec.load "input" "x" global [8, 4] [S(0)] : tensor<4x4xf32>
    %1 = exec.load "param" "w" global [4, 4] [B] : tensor<4x4xf32>
    %2 = graph.matmul %0, %1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    exec.store %2 "y" global [8, 4] [S(0)] : tensor<4x4xf32>
    ```
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"cpu\"",
           "Cluster preset name or JSON file for the cost model">,
  ];
  let dependentDialects = ["::sbpc::sbp::SbpDialect", "::sbpc::exec::ExecDialect"];
}

#endif // SBPC_SBP_PASSES
