// Layouts of values in laid-out IR, shared by the SBP passes and the report:
// the attributes that record them, the mesh a function runs on, compute and
// boxing costs.
#pragma once

#include "compiler/Cost/CostModel.h"
#include "compiler/Sbp/BoxingPlanner.h"
#include "compiler/Sbp/PipelineSchedule.h"
#include "compiler/Sbp/Signatures.h"
#include "dialects/Graph/IR/FusedAttention.h"
#include "dialects/Graph/IR/Precision.h"
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <optional>
#include <vector>

namespace sbpc::sbp {

/// Op attributes: one #sbp.nd per operand / result, the chosen signature.
constexpr llvm::StringLiteral kOperandLayouts = "sbp.operand_layouts";
constexpr llvm::StringLiteral kResultLayouts = "sbp.result_layouts";
/// Function argument attribute: the argument's layout.
constexpr llvm::StringLiteral kArgLayout = "sbp.layout";
/// Function attribute: the mesh the function runs on.
constexpr llvm::StringLiteral kFuncMesh = "sbp.mesh";
/// Set by --sbp-search: on the function, what the search did (algorithm,
/// candidates_evaluated, plan_seconds, search_seconds,
/// memory_bytes_per_rank); on an op,
/// its runner-up signature (operands, results, plan_seconds).
constexpr llvm::StringLiteral kFuncSearch = "sbp.search";
constexpr llvm::StringLiteral kRunnerUp = "sbp.runner_up";
/// Set by `sbpc compile --strategy auto` for --sbp-search, which removes
/// it: on an op, a dictionary from a named strategy to the signature its
/// propagation gave the op ([operand layouts, result layouts]); on a free
/// argument, to the argument's layout. The search starts from the best of
/// these plans too.
constexpr llvm::StringLiteral kStarts = "sbp.starts";

/// Set by --sbp-micro-batches on every op it makes for micro-batch i (an
/// integer from 0): the search lays out the k-th such op of every
/// micro-batch alike (search::SearchProblem), and the report folds an op
/// of a later micro-batch into the same op of the first where both are
/// laid out alike. The accumulating adds (graph.accumulate) have no
/// counterpart in micro-batch 0.
constexpr llvm::StringLiteral kMicroBatch = "sbp.micro_batch";

/// Set by --sbp-micro-batches on the ops that join a split result's
/// micro-batch pieces back into its rows (a reshape of each piece, their
/// concat, a reshape of that). Where each piece is laid out as the joined
/// result (StoredJoin), --sbp-spmdize stores every piece's rows as soon as
/// it is made (exec.store ... rows [i, N]) and drops the join: no rank
/// holds the pieces until the last micro-batch's, and the search's and
/// the report's memory count none of it.
constexpr llvm::StringLiteral kOutputJoin = "sbp.output_join";

/// A result joined from micro-batch pieces that are stored as they are
/// made: `pieces[i]` holds rows i, i + N, ... of `result` (N pieces).
struct StoredJoin {
  mlir::Value result;
  llvm::SmallVector<mlir::Value> pieces;
};
/// The stored join that `op` (marked sbp.output_join) is part of: the join
/// is whole (each piece reshaped, concatenated, reshaped back and
/// returned, nothing else reading them), and, with `checkLayouts`, every piece laid out as the
/// result (layoutOf; a layout that divides rows of the result divides a
/// piece's alike), all on one pipeline stage. None otherwise.
std::optional<StoredJoin> storedJoinOf(mlir::Operation *op, bool checkLayouts = true);
/// Whether `op` is part of a stored join: it makes nothing a rank holds,
/// and reading a piece does not keep it.
inline bool isStoredJoin(mlir::Operation *op) {
  return op && op->hasAttr(kOutputJoin) && storedJoinOf(op).has_value();
}

/// Set by --sbp-pipeline: on every op, the pipeline stage that computes it
/// (an integer from 0); on the function, the number of stages. Each stage
/// runs on a sub-mesh of the function's mesh shape; --sbp-spmdize makes
/// the programs on the mesh with the stages as a first axis, "pp".
constexpr llvm::StringLiteral kStage = "sbp.stage";
constexpr llvm::StringLiteral kFuncStages = "sbp.stages";
/// Set by --sbp-pipeline on the function: the order of the micro-batches'
/// work, "1f1b", "interleaved", "gpipe" or "sequential".
constexpr llvm::StringLiteral kFuncSchedule = "sbp.schedule";
/// Set by --sbp-pipeline on the function under the interleaved schedule:
/// the model chunks each stage holds (PipelineSchedule.h).
constexpr llvm::StringLiteral kFuncChunks = "sbp.chunks";
/// Set by --sbp-pipeline on the function: what its cut was made by
/// (`by`: "time", "memory" where the fastest cut would not fit the device,
/// or "hand"), each stage's estimated memory per rank (`bytes`), each
/// chunk's compute (`seconds`), and the fastest cut's fullest stage and
/// slowest chunk.
constexpr llvm::StringLiteral kFuncCut = "sbp.cut";
/// The name of the pipeline axis.
constexpr llvm::StringLiteral kPipelineAxis = sbprt::kPipelineAxis;
/// The stage that computes `op` (sbp.stage); 0 without stages.
int64_t stageOf(mlir::Operation *op);
/// The stages, other than its producer's, whose ops read `value` (an op's
/// result), in order: where it is sent. A result is stored by its
/// producer's stage, so returning it sends it nowhere.
std::vector<int64_t> stagesReading(mlir::Value value);
/// Whether stage `stage` loads `arg`: one of its ops reads it, or it is a
/// result as it is or read by nothing (the first stage's).
bool stageLoads(mlir::BlockArgument arg, int64_t stage);

/// The ops of a micro-batched step by micro-batch, in program order: the
/// ops marked sbp.micro_batch = i but the accumulating adds
/// (graph.accumulate), where every micro-batch has as many (the k-th of
/// each is then the same op); empty otherwise, or with one micro-batch.
std::vector<std::vector<mlir::Operation *>> microBatchOps(mlir::func::FuncOp fn);

/// Whether `op` is of the forward, `backward` holding the backward's ops:
/// not one of them, a boxing, a constraint, a sum over micro-batches
/// (graph.accumulate) or the return.
bool isForwardOp(mlir::Operation *op, const llvm::DenseSet<mlir::Operation *> &backward);
/// What --sbp-pipeline cuts into stages (PipelineCut.h): `perMicroBatch`,
/// for each micro-batch of microBatchOps (one list where the step has
/// none), the ops of its forward in program order but those computed from
/// inputs and constants alone (`fromArguments`: they go where they are
/// read) and those of a stored join (they go where its pieces are).
struct PipelineCutOps {
  std::vector<std::vector<mlir::Operation *>> perMicroBatch;
  llvm::DenseSet<mlir::Operation *> fromArguments;
};
/// `backward` receives the backward (ops marked graph.backward and those
/// computed from them). `layoutsKnown`: a join is stored where its
/// layouts make it so (isStoredJoin); without (the search, before it lays
/// the step out), every join that may be is left out.
PipelineCutOps pipelineCutOps(mlir::func::FuncOp fn, bool layoutsKnown,
                              llvm::DenseSet<mlir::Operation *> &backward);
/// The units a cut of `ops` (pipelineCutOps) never splits: runs of ops of
/// one block (graph.region: a transformer layer), each op outside a block
/// alone; [begin, end) in `ops`.
std::vector<std::pair<size_t, size_t>> pipelineCutUnits(llvm::ArrayRef<mlir::Operation *> ops);

/// What an op's nd signatures depend on, as a key: its name, its
/// attributes but the marks that only name layers and micro-batches apart
/// (graph.region, graph.selective, sbp.micro_batch) and those that record
/// a layout already chosen (signatures, runner-up, starts), and its
/// operand and result types. Ops of repeated layers and micro-batches
/// share it.
std::vector<const void *> signatureKey(mlir::Operation *op);

/// ndSignatures memoized by signatureKey: a step's ops are mostly copies
/// (layers, micro-batches), and forming nd signatures is allocation-heavy.
class SignatureCache {
public:
  explicit SignatureCache(const sbprt::Mesh &mesh) : mesh(mesh) {}
  const std::vector<NdSignature> &of(mlir::Operation *op);

private:
  const sbprt::Mesh &mesh;
  std::map<std::vector<const void *>, std::vector<NdSignature>> cache;
};

/// For an optimizer update (graph.adamw_update, graph.sgd_update): the
/// operand numbers of its states (result i + 1 is the new state of the
/// i-th); operand 0 is the parameter, 1 its gradient. nullopt for other ops.
std::optional<llvm::SmallVector<unsigned>> updateStateOperands(mlir::Operation *op);
/// For an optimizer update: per result, the operand it replaces (the new
/// parameter the parameter, each new state its state). nullopt for other
/// ops.
std::optional<llvm::SmallVector<unsigned>> updateReplacedOperands(mlir::Operation *op);
/// The adds (graph.accumulate) that sum the micro-batches' gradients an
/// optimizer update reads, from the last to the first: operand 0 the
/// running sum, operand 1 a micro-batch's gradient; as far as each is read
/// by the next (or the update) alone.
std::vector<mlir::Operation *> accumulatingAdds(mlir::Operation *update);
/// Set by --sbp-zero on the function: the stage, the data-parallel axes and
/// the bytes of parameters, gradients and optimizer states per rank.
constexpr llvm::StringLiteral kFuncZero = "sbp.zero";
/// Function argument attribute: gather this argument once per consumer
/// rather than once for all (ZeRO-3's parameters), so that the whole copy
/// lives only around each use.
constexpr llvm::StringLiteral kGatherPerUse = "sbp.gather_per_use";

/// Module attribute: "bf16" when the programs will compute in bf16 (sbpc
/// compile --precision bf16), so that boxings and costs count 2-byte
/// elements where --exec-bf16 will store them.
constexpr llvm::StringLiteral kModulePrecision = "sbp.precision";
/// Module attribute (unit), with kModulePrecision bf16: the programs will
/// compute attention as flash attention (sbpc compile --fused-attention,
/// on by default), so the memory estimates leave out the scores and
/// probabilities that --exec-fuse keeps out of memory.
constexpr llvm::StringLiteral kModuleFusedAttention = "sbp.fused_attention";
/// sbp.boxing attribute: the boxing moves bf16 elements of its f32 value.
constexpr llvm::StringLiteral kBoxingBf16 = "sbp.bf16";

/// The element sizes a laid-out function's values will have in its
/// programs: their types' in f32, and under bf16 2 bytes for every float
/// value and use that graph::findF32Storage does not keep in f32. Under
/// flash attention (kModuleFusedAttention), also which values the programs
/// never store.
class ElementSizes {
public:
  /// Every value at its type's size.
  ElementSizes() = default;
  /// Those of `fn`: at its types' sizes, or bf16's where its module says so.
  explicit ElementSizes(mlir::func::FuncOp fn);
  /// Bytes of an element of `value` where it is stored.
  size_t of(mlir::Value value) const;
  /// Bytes of an element of what `use` reads: what a boxing for it moves.
  size_t ofUse(mlir::OpOperand &use) const;
  /// Whether `op` computes in bf16.
  bool computesInBf16(mlir::Operation *op) const {
    return storage && !storage->ops.contains(op);
  }
  /// The share of `value`'s bytes (at of(value) an element) its programs
  /// store (graph::FusedAttention::storedShare), every attention core
  /// fusing: as on a laid-out graph with its boxings, where a change of
  /// layout inside a core already keeps findFusedAttention from finding it.
  double storedShare(mlir::Value value) const;
  /// The same where `fuses(c)` says whether core c fuses (a plan's layouts
  /// may move an operand inside it).
  double storedShare(mlir::Value value, llvm::function_ref<bool(unsigned)> fuses) const;
  /// The op until which `value` lives besides its readers, every core
  /// fusing (graph::FusedAttention::livesUntil), or null.
  mlir::Operation *livesUntil(mlir::Value value) const;
  /// Flash attention's cores, or null where the programs will not fuse it.
  const graph::FusedAttention *attention() const {
    return attention_ ? &*attention_ : nullptr;
  }

private:
  std::optional<graph::F32Storage> storage;
  std::optional<graph::FusedAttention> attention_;
};

/// Bytes of an element a boxing moves (its kBoxingBf16 attribute).
size_t elementBytes(BoxingOp boxing);

/// The module's only sbp.mesh; an error at the module otherwise.
mlir::FailureOr<MeshOp> findMesh(mlir::ModuleOp module);

/// The layout `value` has after propagation (from its producer's result
/// layouts, a boxing or constraint, or its argument attribute), if any.
std::optional<sbprt::NdSbp> layoutOf(mlir::Value value);

/// An array of #sbp.nd attributes, one per layout.
mlir::ArrayAttr layoutsAttr(mlir::MLIRContext *ctx, llvm::ArrayRef<sbprt::NdSbp> layouts);

/// The data-parallel axes of a step on `mesh`: those (of more than one
/// device) on which some input's (graph.input) batch, dimension 0, is
/// split, by `layoutOf` (an argument's layout, if it has one).
std::vector<size_t>
dataParallelAxes(mlir::func::FuncOp fn, const sbprt::Mesh &mesh,
                 llvm::function_ref<std::optional<sbprt::NdSbp>(mlir::Value)> layoutOf);

/// ZeRO's split of `layout`, a parameter's or a value of its shape: on
/// each of `axes` in turn (data-parallel axes it holds `value` whole or
/// partial on), the largest dimension that still divides, whole
/// dimensions first. A dimension another axis splits is split further
/// only when that axis comes first (outer) in the mesh: only then is each
/// rank's new part inside the part it holds, a slice without
/// communication. Returns the axes it split; the others keep their layout.
std::vector<size_t> zeroSplit(const sbprt::Mesh &mesh, sbprt::NdSbp &layout, mlir::Value value,
                              llvm::ArrayRef<size_t> axes);

/// Stores a chosen signature on an op.
void setSignature(mlir::Operation *op, llvm::ArrayRef<sbprt::NdSbp> operands,
                  llvm::ArrayRef<sbprt::NdSbp> results);
/// The same from its attributes (layoutsAttr), in one update of the op's
/// attributes: a step's ops number in the hundreds of thousands, and most
/// share a few signatures.
void setSignature(mlir::Operation *op, mlir::ArrayAttr operands, mlir::ArrayAttr results);

/// Empty when `layout` fits `value` (a static tensor) on `mesh`; otherwise
/// what is wrong (see sbprt::checkLayout).
std::string checkValueLayout(const sbprt::Mesh &mesh, const sbprt::NdSbp &layout,
                             mlir::Value value);

/// The shape and element size of a tensor value.
std::vector<int64_t> shapeOf(mlir::Value value);
size_t elementBytes(mlir::Value value);
/// The bytes of the part of `value` one rank holds when laid out as
/// `layout`, in elements of `elementBytes` (0: its type's).
int64_t localBytes(const sbprt::Mesh &mesh, const sbprt::NdSbp &layout, mlir::Value value,
                   size_t elementBytes = 0);

/// Compute time of `op` under `sig`: its FLOPs, at the bf16 rate where it
/// computes in bf16, and the bytes it touches on the local shapes, at the
/// element sizes of `sizes`.
double computeSecondsOf(mlir::Operation *op, const NdSignature &sig, const sbprt::Mesh &mesh,
                        const Cluster &cluster, const ElementSizes &sizes);

/// Boxing plans, memoized: a graph asks for the same few changes many times.
class BoxingPlans {
public:
  BoxingPlans(const sbprt::Mesh &mesh, const Cluster &cluster) : mesh(mesh), cluster(cluster) {}
  /// The cheapest plan to change `value` from `from` to `to`.
  const BoxingPlan &get(mlir::Value value, const sbprt::NdSbp &from, const sbprt::NdSbp &to,
                        size_t elementBytes);

private:
  const sbprt::Mesh &mesh;
  const Cluster &cluster;
  std::map<std::string, BoxingPlan> plans;
};

/// What a pass over laid-out functions works with.
struct LayoutContext {
  MeshOp meshOp;
  sbprt::Mesh mesh;
  Cluster cluster;
  BoxingPlans *plans;
};

/// Loads the cluster `clusterName`, finds the module's mesh, and calls
/// `body` on every function with a body; fails (with a diagnostic) when
/// any of these does.
mlir::LogicalResult
forEachFunction(mlir::ModuleOp module, const std::string &clusterName,
                llvm::function_ref<mlir::LogicalResult(mlir::func::FuncOp, LayoutContext &)> body);

/// "m.mlir:7:8": a location as a person reads it (file name without its directory).
std::string describeLocation(mlir::Location loc);

} // namespace sbpc::sbp
