// The layout search as a problem on plain data. Nodes are the ops to lay
// out (their candidate nd signatures with compute times) and the free
// arguments (their candidate layouts); a value's layout is its producer's
// choice, and every use pays the boxing from that layout to the layout its
// consumer's choice wants. Solvers (exact, D-Rec, auto) choose one
// candidate per node. Layouts and value types are interned as small
// integers so that solvers compare and cost them without strings.
#pragma once

#include "compiler/Cost/CostModel.h"
#include "compiler/Sbp/PipelineCut.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Sbp/ValueLayouts.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace sbpc::search {

/// The candidates of an op, shared by every op with the same name,
/// attributes and types (the layers of a model repeat).
struct Candidates {
  std::vector<NdSignature> sigs;
  std::vector<double> compute; // seconds, per signature
  // Interned layouts: [signature][operand] and [signature][result].
  std::vector<std::vector<int>> operandIds, resultIds;
  // Per signature and mesh axis: an id of what it does on that axis alone
  // (its 1-D signature), and whether that is replication.
  std::vector<std::vector<int>> axisIds;
  std::vector<std::vector<char>> replicated;
  std::vector<double> outputBytes; // per rank, per signature
  /// [signature][input]: how many times the signature pays the change of
  /// that input's layout (empty: once each). ZeRO's view (setZero) of an
  /// optimizer update pays some not at all and others once per
  /// micro-batch.
  std::vector<std::vector<float>> inputScale;
};

/// An op or a free argument to lay out.
struct Node {
  mlir::Operation *op = nullptr; // null for a free argument
  mlir::Value argument;          // the free argument
  /// The same op of the later micro-batches (sbp.micro_batch), laid out as
  /// `op` is: the node stands for them all, its compute and the boxing of
  /// its inputs paid once per copy (`weight`: 1 + copies).
  std::vector<mlir::Operation *> copies;
  double weight = 1;
  /// Per operand, with copies: whether every copy reads the same value
  /// (a parameter), whose change of layout is then made once for all
  /// (kOnce), unless ZeRO-3 gathers it per use from where it stores it
  /// split (kOnceUnlessGathered).
  std::vector<char> sharedInput;
  static constexpr char kPerCopy = 0, kOnce = 1, kOnceUnlessGathered = 2;
  /// What the solvers cost: `base`, or with a ZeRO stage what --sbp-zero
  /// will make of it (SearchProblem::setZero). The signatures are the
  /// same; the layouts, compute times and input scales are ZeRO's (the
  /// per-axis ids, by which solvers group choices, stay the base's).
  const Candidates *candidates = nullptr;
  const Candidates *base = nullptr;
  /// What the node reads and defines (a free argument defines itself).
  /// ZeRO's view adds to an optimizer update's: it reads a micro-batch's
  /// gradient beside their sum, and defines the parameter as stored
  /// (SearchProblem::setZero).
  std::vector<mlir::Value> inputs, outputs;
  /// Bytes of an element each input reads (sbp::ElementSizes::ofUse).
  std::vector<size_t> inputElementBytes;
  /// Per input: an optimizer update's parameter or state, stored as its
  /// argument is laid out. Its result goes back to that layout for the
  /// next step, so a change of layout there is paid both ways.
  std::vector<char> roundTrip;

  size_t numChoices() const { return candidates->sigs.size(); }
  const NdSignature &choice(size_t c) const { return candidates->sigs[c]; }
  /// Seconds of choice c, for the op and its copies.
  double compute(size_t c) const { return weight * candidates->compute[c]; }
  int axisId(size_t c, size_t axis) const { return candidates->axisIds[c][axis]; }
  bool replicatedOn(size_t c, size_t axis) const { return candidates->replicated[c][axis]; }
  int inputLayout(size_t c, size_t k) const { return candidates->operandIds[c][k]; }
  double inputScale(size_t c, size_t k) const {
    return candidates->inputScale.empty() ? 1.0 : candidates->inputScale[c][k];
  }
  int outputLayout(size_t c, size_t r) const { return candidates->resultIds[c][r]; }
  /// The op's name, or "argument" for a free argument.
  std::string name() const;
};

/// Where a node input comes from.
struct Source {
  int node = -1;   // the producing node, or -1 for a fixed argument
  int output = 0;  // which of its outputs
  int fixed = -1;  // a fixed argument's layout id
};

class SearchProblem {
public:
  /// Every op of `fn` with an SbpOpInterface and every sbp.constraint (a
  /// node with one choice) in program order, after a node for every free
  /// argument (one without an `sbp.layout`); its candidates are the
  /// layouts its consumers can take. Arguments with a layout are fixed.
  ///
  /// In a micro-batched step (sbp.micro_batch) with `tieMicroBatches`,
  /// the k-th op of every micro-batch is one node, that of micro-batch 0,
  /// where the copies are alike (the same candidates) and read alike: each
  /// operand the same value in every copy, or each copy's own result of
  /// one tied node. A step of N micro-batches is then searched as about
  /// one, its costs N-fold; the copies take the same layouts.
  static mlir::FailureOr<SearchProblem> build(mlir::func::FuncOp fn, const sbprt::Mesh &mesh,
                                              const Cluster &cluster, sbp::BoxingPlans &plans,
                                              bool tieMicroBatches = true);

  const std::vector<Node> &nodes() const { return nodes_; }
  const sbprt::Mesh &mesh() const { return *mesh_; }
  const Cluster &cluster() const { return *cluster_; }
  mlir::func::FuncOp function() const { return fn_; }

  /// Where input `k` of node `n` comes from.
  const Source &source(size_t n, size_t k) const { return sources_[n][k]; }
  /// The (node, input) pairs that read output `r` of node `n`.
  const std::vector<std::pair<int, int>> &uses(size_t n, size_t r) const { return uses_[n][r]; }

  /// An interned layout and its id.
  const sbprt::NdSbp &layout(int id) const { return layouts_[id]; }
  int layoutId(const sbprt::NdSbp &layout);
  /// α-β seconds to change input `k` of node `n` (and of its copies) from
  /// layout `from` to the one its choice `c` takes (memoized): per copy,
  /// or once where every copy reads the same value (unless ZeRO-3 gathers
  /// it at each use), times the choice's input scale (ZeRO's view).
  double inputSeconds(size_t n, size_t k, size_t c, int from);
  /// Bytes of `value` per rank under layout `id`.
  double localBytes(mlir::Value value, int id);
  /// Of those, the bytes its programs store (sbp::ElementSizes::storedShare)
  /// where every attention core fuses: the memory price's count, node by
  /// node; planMemory checks each core against the plan.
  double storedBytes(mlir::Value value, int id);
  /// What solvers minimize for node n's choice c: its compute plus, while
  /// a memory price is set, that price times the bytes it defines.
  double nodeCost(size_t n, size_t c) const {
    const Node &node = nodes_[n];
    return node.compute(c) + memoryPrice_ * node.candidates->outputBytes[c];
  }
  void setMemoryPrice(double secondsPerByte) { memoryPrice_ = secondsPerByte; }

  /// Costs every plan as --sbp-zero at `stage` (0 to 3) will make it on
  /// the data-parallel `axes` (those the plan splits the batch on:
  /// dataParallelAxes). Each optimizer update is split on the axes where
  /// it holds its parameter whole (sbp::zeroSplit): its compute divided,
  /// its states stored so, and from stage 1 its parameter gathered back
  /// after it. From stage 2 its gradient is reduce-scattered into the
  /// split: in a micro-batched step each micro-batch's as it joins the
  /// running sum, which the update's view reads as an extra input paid
  /// once per micro-batch (and the sum not at all), where the update is
  /// split. At 3 the parameter is stored as the update takes it, and
  /// gathered from there before each use, each micro-batch's copy's too:
  /// the update's view defines it as an extra output that the
  /// parameter's other uses read. Stage 0, or no axes, costs the plan as
  /// it is. The choices stay the same; only what they cost changes, so a
  /// plan solved under one view can be costed under another.
  void setZero(int stage, std::vector<size_t> axes);
  int zeroStage() const { return zeroStage_; }
  const std::vector<size_t> &zeroAxes() const { return zeroAxes_; }
  /// The data-parallel axes of a plan (sbp::dataParallelAxes): where it
  /// splits some input's batch.
  std::vector<size_t> dataParallelAxes(const std::vector<size_t> &choice);
  /// The layout id a fixed argument (one with an `sbp.layout`) is costed
  /// at: its own, or ZeRO's with setZero; nullopt for any other value.
  std::optional<int> fixedLayoutId(mlir::Value arg) const {
    auto it = fixedView_.find(arg);
    return it == fixedView_.end() ? std::nullopt : std::optional<int>(it->second);
  }
  /// Whether ZeRO-3 gathers `value`, a parameter stored as `layout`, before
  /// each use: where that splits a data-parallel axis.
  bool gatheredAtEachUse(mlir::Value value, int layout) {
    return gatheredPerUse_.contains(value) && splitOnZeroAxes(layout);
  }

  /// The ops in program order (tied copies too), each with its node.
  const std::vector<std::pair<size_t, mlir::Operation *>> &steps() const { return steps_; }
  /// The step of an op.
  size_t stepOf(mlir::Operation *op) const { return stepOf_.lookup(op); }
  /// Per step, the block --sbp-pipeline places it with when it cuts (-1
  /// for steps it does not cut; sbp::pipelineCutOps, pipelineCutUnits),
  /// found on first use.
  const std::vector<int> &pipelineBlocks();
  /// Per block, its graph.region ("" for an op outside blocks).
  const std::vector<std::string> &pipelineBlockNames() {
    pipelineBlocks();
    return pipelineBlockNames_;
  }
  /// The step of the last op that reads `value` (the number of steps when
  /// the function returns it).
  size_t lastUse(mlir::Value value) const { return lastUse_.lookup(value); }
  bool isUsed(mlir::Value value) const { return lastUse_.count(value); }
  /// The node of an op (of a tied copy, the node it is a copy of).
  size_t nodeOf(mlir::Operation *op) const { return nodeOf_.lookup(op); }
  /// How many ops the nodes stand for beyond themselves (tied copies).
  size_t tiedCopies() const { return tiedCopies_; }

  /// The element sizes and flash attention's cores (sbp::ElementSizes).
  const sbp::ElementSizes &sizes() const { return sizes_; }
  /// Per attention core, its ops' inputs (node, input): the core fuses
  /// where a plan changes the layout of none.
  const std::vector<std::vector<std::pair<size_t, size_t>>> &coreInputs() const {
    return coreInputs_;
  }
private:
  const Candidates *candidatesOf(mlir::Operation *op, std::string &error);
  void intern(Candidates &candidates, llvm::ArrayRef<mlir::Value> outputs);
  /// Seconds to change input k of node n from `from` to `to`, once.
  double changeSeconds(size_t n, size_t k, int from, int to);

  mlir::func::FuncOp fn_;
  const sbprt::Mesh *mesh_ = nullptr;
  const Cluster *cluster_ = nullptr;
  sbp::BoxingPlans *plans_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<std::vector<Source>> sources_;
  std::vector<std::vector<std::vector<std::pair<int, int>>>> uses_;
  llvm::DenseMap<mlir::Value, int> fixed_;
  llvm::DenseMap<mlir::Value, size_t> lastUse_;
  llvm::DenseMap<mlir::Operation *, size_t> nodeOf_;
  std::vector<std::pair<size_t, mlir::Operation *>> steps_;
  llvm::DenseMap<mlir::Operation *, size_t> stepOf_;
  std::optional<std::vector<int>> pipelineBlocks_;
  std::vector<std::string> pipelineBlockNames_;
  std::vector<std::vector<std::pair<size_t, size_t>>> coreInputs_;
  // Interning.
  std::vector<std::unique_ptr<Candidates>> ownedCandidates_;
  std::map<std::vector<const void *>, const Candidates *> candidatesByKey_;
  std::vector<sbprt::NdSbp> layouts_;
  std::map<std::string, int> layoutIds_;
  /// Interned (type, element bytes).
  int typeId(mlir::Type type, size_t elementBytes);

  sbp::ElementSizes sizes_;
  std::map<std::pair<const void *, size_t>, int> typeIds_;
  std::unordered_map<uint64_t, double> boxing_;
  std::unordered_map<uint64_t, double> bytes_;
  std::map<std::string, int> axisIds_;
  double memoryPrice_ = 0;
  size_t tiedCopies_ = 0;

  // ZeRO's view (setZero).
  /// `id` split by ZeRO on the data-parallel axes where it is not split
  /// (sbp::zeroSplit, for `value`'s shape); `id` where it splits none.
  int zeroOf(int id, mlir::Value value);
  /// An optimizer update's candidates as ZeRO makes them: split, reading
  /// the sum of `gradients` micro-batches' gradients (and, with more than
  /// one, a micro-batch's as an extra input), with the parameter as stored
  /// as an extra output if `storesParameter`.
  const Candidates *updateView(const Node &node, size_t gradients, bool storesParameter);
  /// A stored argument's candidates as ZeRO stores them: split.
  const Candidates *storedView(const Node &node);
  /// Restores the graph setZero extended.
  void restoreBase();
  /// Whether layout `id` splits a data-parallel axis of setZero's.
  bool splitOnZeroAxes(int id);
  std::vector<signed char> splitOnZeroAxes_;
  int zeroStage_ = 0;
  std::vector<size_t> zeroAxes_;
  llvm::DenseMap<mlir::Value, int> fixedView_;
  llvm::DenseSet<mlir::Value> gatheredPerUse_;
  std::map<std::pair<const void *, int>, int> zeroIds_;
  std::map<std::tuple<const Candidates *, size_t, bool>, std::unique_ptr<Candidates>> zeroViews_;
  std::vector<std::vector<Source>> baseSources_;
  std::vector<std::vector<std::vector<std::pair<int, int>>>> baseUses_;
  std::vector<std::pair<size_t, size_t>> baseArity_; // per node: inputs, outputs
};

/// A solution: one choice per node, what it costs, and how hard it was to find.
struct Solution {
  std::vector<size_t> choice;
  double seconds = 0;
  size_t candidatesEvaluated = 0;
  /// Where auto's local search started: drec, axis-by-axis or a named
  /// strategy's plan (empty when auto solved exactly).
  std::string start;
};

/// The cost of choosing `choice[n]` for every node n: compute plus the
/// boxing of every use from its producer's layout to the layout its
/// consumer wants. What every solver minimizes.
double evaluate(SearchProblem &problem, const std::vector<size_t> &choice);

/// What node `n` costs under choice `c` given its neighbours' choices: its
/// compute plus the boxing on every edge it touches.
double localCost(SearchProblem &problem, const std::vector<size_t> &choice, size_t n, size_t c);

/// Per-rank bytes of a plan: every argument for the whole step plus the
/// peak of live activations in program order (as report.json counts it),
/// each reshard's result (one per value and layout) from the first op that
/// reads it to the last, without what flash attention's cores never store
/// where the plan keeps each core's inputs as they are made. Under ZeRO's
/// view (SearchProblem::setZero) as --sbp-zero will make it: from stage 1
/// the optimizer states stored split, from 2 the gradients (and the sums
/// that accumulate them over micro-batches) counted as their slices, at 3
/// the parameters stored split, each gathered copy live at its use only.
///
/// On a pipeline (`pipeline.cut.stages` N > 1), an estimate of the
/// fullest stage of the cut --sbp-pipeline will make (sbp::cutPipeline:
/// by time, or by memory where a stage cut by time would exceed
/// `pipeline.cut.memoryLimit` > 0; sbp::handCutChunks where
/// `pipeline.starts` name the blocks that begin its stages), made of whole blocks as the pass
/// makes them (runs of micro-batch 0's forward ops of one graph.region),
/// each taking its ops' compute time, the arguments its ops read first,
/// what they leave for the backward (the stash, a chunk's counted once
/// for each micro-batch it holds at that moment) and the rest of the step
/// (optimizer states, gradient sums) in proportion to its arguments; and
/// whole what the backward (recomputation too) has live at the peak but
/// parameters' gradients, one block's working set, which every stage has.
/// Where the model has fewer blocks than chunks, shares of it instead: a
/// stage that holds a share x holds x of the parameters, states and
/// activations, x of the stash once for each micro-batch it holds at once
/// (`pipeline.inFlight[s]`), x = 1/N by time, else the shares at which the
/// stages are as full as each other.
struct PipelineShare {
  sbp::CutShape cut;
  /// The blocks that begin chunks 1, 2, ... of a cut by hand
  /// (sbp::handCutChunks; none: the pass cuts).
  std::vector<std::string> starts;
  /// Per stage, the most micro-batches it holds at once; fractional under
  /// the interleaved schedule (empty: 1).
  std::vector<double> inFlight;
};
/// `stretch`, where given: how much slower the cut's slowest chunk is
/// than that of the fastest cut (a cut to balance memory gives the first
/// stages fewer blocks than time would); 1 off a pipeline, by time or by
/// hand.
double planMemory(SearchProblem &problem, const std::vector<size_t> &choice,
                  const PipelineShare &pipeline = {}, double *stretch = nullptr);

/// Limits of the exact solver: the largest table one elimination may
/// build, all tables together (entries, 8 bytes each), and the entries
/// built and combined (the time). Checked by planning the elimination
/// before building any table.
struct ExactBudget {
  size_t maxTable = size_t(1) << 22;
  size_t maxTotal = size_t(1) << 25;
  size_t maxWork = std::numeric_limits<size_t>::max();
};

/// The optimum by variable elimination over the layouts of values: every
/// node is a cost table over the layouts of the values it reads and
/// defines; values are eliminated cheapest first (chains and leaves
/// first, parallel edges merge as their tables add up), then choices are
/// read back. `allowed`, when given, restricts node n to the choices in
/// allowed[n] (the solution then indexes the full choice lists). Fails
/// with `error` when a table would exceed `budget`.
///
/// With `hold`, it does not fail on size: where a table would exceed the
/// budget, the widest value in it keeps the layout `hold->plan` gives it
/// (its producer's choice there, or its first allowed one if that is not
/// allowed), until every table fits. The result is then the optimum over
/// the rest with those values held (a large-neighbourhood step: no worse
/// than the plan when the plan is allowed).
struct HoldAt {
  const std::vector<size_t> &plan;
  unsigned variant = 0; // which of equally wide values to hold first
  size_t held = 0;      // out: how many values were held
};
std::optional<Solution> solveExact(SearchProblem &problem, const ExactBudget &budget,
                                   std::string &error,
                                   const std::vector<std::vector<size_t>> *allowed = nullptr,
                                   HoldAt *hold = nullptr);

/// MindSpore's double-recursive search: one round per mesh axis (each
/// axis a cut into its size); within a round, ops heaviest first, each cut
/// along its cheapest way given the neighbours already cut in the round.
Solution solveDRec(SearchProblem &problem);

/// How auto searches.
struct AutoOptions {
  /// Reject plans over the cluster's device memory per rank.
  bool checkMemory = true;
  /// With checkMemory, the share of the device's memory a plan may need
  /// by planMemory (below 1 where its estimate is known to fall short).
  double memoryShare = 1;
  /// The pipeline the plan will be cut into: the check is of the fullest
  /// stage's memory as planMemory estimates it (PipelineShare).
  PipelineShare pipeline;
  /// Whether --sbp-pipeline, cutting without starts, cuts for memory
  /// where a cut by time would not fit (its balance-memory).
  bool cutForMemory = true;
  /// `pipeline` as planMemory takes it where plans must fit `memoryLimit`
  /// (0: unchecked): where the pass cuts for memory, for that memory.
  PipelineShare pipelineWithin(double memoryLimit) const {
    PipelineShare share = pipeline;
    share.cut.memoryLimit = pipeline.starts.empty() && cutForMemory ? memoryLimit : 0;
    return share;
  }
  /// When the whole graph is solved exactly (about a second of work on
  /// one core at most); otherwise local search.
  ExactBudget whole{size_t(1) << 23, size_t(1) << 25, size_t(2000000000)};
  /// Plans to start the local search from besides D-Rec's and the
  /// axis-by-axis solve's (the named strategies': sbp::kStarts), by name.
  std::vector<std::pair<std::string, std::vector<size_t>>> starts;
};

/// The default search: the exact optimum when the eliminated graph is
/// small; otherwise the best of D-Rec, an axis-by-axis exact solve and the
/// given starts,
/// improved by exact re-solves of one mesh axis at a time and single-node
/// moves until nothing improves. Memory-aware: a plan over
/// `cluster.memoryBytes` per rank is re-solved with a growing price on
/// bytes; fails with `error` when none fits.
std::optional<Solution> solveAuto(SearchProblem &problem, std::string &error,
                                  const AutoOptions &options = {});

/// The runner-up of node n in `solution`: its cheapest other choice with
/// every other node fixed, and the plan cost with it (nullopt when the
/// node has one choice).
std::optional<std::pair<size_t, double>> runnerUp(SearchProblem &problem,
                                                  const Solution &solution, size_t n);

/// Writes `solution` onto the function as --sbp-propagate would (signatures,
/// argument layouts, the mesh), ready for --sbp-insert-boxing.
void applySolution(SearchProblem &problem, const Solution &solution, sbp::MeshOp mesh);

} // namespace sbpc::search
