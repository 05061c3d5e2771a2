// --sbp-pipeline: places a laid-out function's ops on pipeline stages.
//
// Every stage runs on a sub-mesh of the function's mesh shape, and a value
// keeps its layout on every stage, so a value that crosses from one stage
// to another goes rank to rank unchanged (--sbp-spmdize makes the sends
// and receives). What is left to choose is which stage computes each op:
//
// - The forward ops are cut, in program order, into contiguous stages,
//   none empty, whose slowest is as fast as can be (compute time by the
//   cost model, on the ops' local shapes). A block of the model
//   (graph.region: a transformer layer) is never cut. With micro-batches the first micro-batch is
//   cut and every later one follows it op for op. Forward ops computed
//   from inputs and constants alone (a micro-batch's slice of an input, a
//   mask) are not cut: they go to the lowest stage that reads them.
//   Where a stage of that cut would not fit the device's memory (by the
//   cut's estimate of each block, memoryOf), the cut is instead the
//   fastest whose every stage fits, the first stages, which hold more
//   micro-batches at once, taking fewer blocks (compiler/Sbp/PipelineCut.h,
//   by which --sbp-search estimates the cut's memory too).
// - Any other op (the backward, sums over micro-batches, updates) goes
//   where the forward values it reads all are, a value being where it is
//   computed and where forward ops read it (a backward op reads the inputs
//   of the op it differentiates, which that op's stage holds): among those
//   stages, the one its backward operands come from, else the last.
//   Without forward operands, the lowest stage its backward operands come
//   from (gradients flow towards the first stage). A sum over micro-batches
//   of terms that each add two stages' contributions (a parameter two
//   stages read), laid out as the sum or boxed into it (ZeRO-2), becomes
//   each stage's own sum and one add of the two.
// - Boxings, and ops that read nothing staged (constants), go to the
//   lowest stage of their users, so that a value is sent as it was
//   computed and changed where it is needed.
//
// With micro-batches, the ops are then reordered into a pipeline
// schedule, so that the stages work on different micro-batches at once.
// 1F1B (the default; PipeDream-Flush, as Megatron-LM): stage s runs
// S - s - 1 forwards to fill the pipeline, then a forward and a backward
// in turn, so it holds the activations of at most S - s micro-batches.
// GPipe: every forward, then every backward (M micro-batches' activations
// held). Each op goes at the time its task starts in a simulation of the
// schedule (each chunk's forward and backward taking the cost model's
// time), in a topological order; every rank meets its sends and
// collectives in this one order, which --sbp-spmdize keeps.
// `schedule=sequential` keeps the micro-batches one after another (the
// stages wait for each other).
#include "compiler/Sbp/PipelineCut.h"
#include "compiler/Sbp/ValueLayouts.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Sbp/Passes.h"

#include "mlir/IR/Builders.h"

#include <array>
#include <cmath>
#include <functional>
#include <queue>
#include <set>

namespace sbpc::sbp {
#define GEN_PASS_DEF_SBPPIPELINESTAGES
#include "passes/Sbp/Passes.h.inc"
} // namespace sbpc::sbp

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;

namespace {

class StagePlacer {
public:
  StagePlacer(func::FuncOp fn, LayoutContext &context, int64_t stages, int64_t chunks,
              StringRef schedule, ArrayRef<std::string> starts, bool balanceMemory)
      : fn(fn), context(context), stages(stages), chunks(chunks), parts(stages * chunks),
        schedule(schedule), starts(starts), sizes(fn),
        memoryLimit(balanceMemory ? context.cluster.memoryBytes : 0) {}
  LogicalResult run();

private:
  /// Whether `op` is of the forward: not the backward (once `backward` is
  /// known), a boxing, a constraint, a sum over micro-batches or the return.
  bool isForwardOp(Operation *op) const { return sbp::isForwardOp(op, backward); }
  /// Follows boxings back to the value they change.
  static Value source(Value v) {
    while (auto boxing = v.getDefiningOp<BoxingOp>())
      v = boxing.getInput();
    return v;
  }
  double secondsOf(Operation *op);
  /// Bytes per rank of `v` in its layout (0 without one).
  double bytesOf(Value v) const {
    std::optional<sbprt::NdSbp> layout = layoutOf(v);
    return layout ? static_cast<double>(localBytes(context.mesh, *layout, v, sizes.of(v))) : 0;
  }
  /// What a part of the cut (ops of micro-batch 0's forward) makes its
  /// stage hold, per rank: the step's parameters its ops read, their
  /// optimizer states and gradient sums, and copies of them in another
  /// layout that more than one micro-batch reads; its stash; its working
  /// set, the backward of the op with the largest results, the gradients
  /// it passes on and a micro-batch's gradients of its parameters.
  /// `updatesCounted`: the parameters whose update (states, gradient sum)
  /// an earlier part counts.
  CutMemory memoryOf(ArrayRef<Operation *> ops, llvm::DenseSet<Value> &updatesCounted);
  /// Cuts `ops` (forward ops in program order) into the stages, at the
  /// blocks `starts` names if it names any. `record` keeps what the cut
  /// was made by (kFuncCut).
  LogicalResult cut(ArrayRef<Operation *> ops, bool record);
  /// Adds the stages of the placed ops that read `v` and that `counts`
  /// accepts, looking through boxings (their own stage follows their
  /// readers').
  void readerStages(Value v, llvm::function_ref<bool(Operation *)> counts,
                    std::set<int64_t> &into) const;
  /// Moves each of `ops` (backward ops placed by their gradient operands
  /// alone: reshapes, sums), last first, to the stage where it and its
  /// neighbours send the fewest bytes between stages: where its operands
  /// already are, or where its readers are.
  void improve(ArrayRef<Operation *> ops);
  /// Splits each sum over micro-batches (graph.accumulate adds) whose
  /// every term adds two contributions made on different stages (the
  /// gradient of a parameter read on two stages) into a sum of each
  /// contribution on its stage and one add of the two, so that the far
  /// stage sends its sum once a step rather than a term per micro-batch.
  /// A term that reaches the sum through boxings (ZeRO-2's reduce-scatter
  /// into the split sum) has each contribution take copies of them. Only
  /// a sum of all `microBatches` micro-batches' terms splits (so every
  /// micro-batch loses the same op). The ops it removes leave
  /// `gradientOnly` and `floating` (the boxings to place); the add of the
  /// two sums joins the first, the boxings' copies the second.
  void splitFarSums(int64_t microBatches, SmallVectorImpl<Operation *> &gradientOnly,
                    SmallVectorImpl<Operation *> &floating);
  /// Reorders the ops into the schedule (see the top of the file).
  LogicalResult schedulePipeline(int64_t microBatches);
  std::optional<int64_t> stageOf(Operation *op) const {
    auto found = stage.find(op);
    return found == stage.end() ? std::nullopt : std::optional(found->second);
  }

  func::FuncOp fn;
  LayoutContext &context;
  int64_t stages;
  /// Model chunks per stage (1 but under the interleaved schedule), and
  /// the chunks in all: the ops are placed on chunks, chunk c on stage
  /// c % stages.
  int64_t chunks, parts;
  StringRef schedule;
  ArrayRef<std::string> starts; // blocks that begin chunks 1, 2, ... (by hand)
  ElementSizes sizes;
  llvm::DenseSet<Operation *> backward;
  /// Each op's chunk (its stage without chunks).
  llvm::DenseMap<Operation *, int64_t> stage;
  size_t units_ = 0; // the most units a cut had
  /// Device memory per rank the cut keeps each stage within (0: time
  /// alone), and the pipeline it cuts for (once the micro-batches are
  /// known).
  double memoryLimit;
  CutShape shape;
  /// What the cut was made by (kFuncCut), once made.
  DictionaryAttr cutBy;
};

double StagePlacer::secondsOf(Operation *op) {
  auto operands = op->getAttrOfType<ArrayAttr>(kOperandLayouts);
  auto results = op->getAttrOfType<ArrayAttr>(kResultLayouts);
  if (!operands || !results || !isa<SbpOpInterface>(op))
    return 0;
  NdSignature sig;
  for (Attribute a : operands)
    sig.operands.push_back(cast<NdSbpAttr>(a).toLayout());
  for (Attribute a : results)
    sig.results.push_back(cast<NdSbpAttr>(a).toLayout());
  return computeSecondsOf(op, sig, context.mesh, context.cluster, sizes);
}

CutMemory StagePlacer::memoryOf(ArrayRef<Operation *> ops, llvm::DenseSet<Value> &updatesCounted) {
  CutMemory memory;
  llvm::DenseSet<Value> counted;
  auto isInput = [&](BlockArgument arg) {
    return !!fn.getArgAttr(arg.getArgNumber(), graph::GraphDialect::kInputAttr);
  };
  // A value read by the ops of more than one micro-batch lives through
  // them all.
  auto readAcrossMicroBatches = [](Value v) {
    std::optional<int64_t> first;
    for (Operation *user : v.getUsers()) {
      auto mark = user->getAttrOfType<IntegerAttr>(kMicroBatch);
      int64_t mb = mark ? mark.getInt() : -1;
      if (first && *first != mb)
        return true;
      first = mb;
    }
    return false;
  };
  // Whether a forward op reads `v`, as it is or through boxings; with
  // `elsewhere`, one not among `ops`.
  llvm::DenseSet<Operation *> here(ops.begin(), ops.end());
  std::function<bool(Value, bool)> readByForward = [&](Value v, bool elsewhere) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      if (auto boxing = dyn_cast<BoxingOp>(user))
        return readByForward(boxing.getResult(), elsewhere);
      return isForwardOp(user) && !(elsewhere && here.contains(user));
    });
  };
  // Whether `v` is kept for the backward: a backward op reads it, or a
  // boxing made in the backward does (one no forward op reads, placed
  // before its first reader). A copy the forward makes and the backward
  // reads is kept itself, not what it was made from.
  std::function<bool(Value)> keptForBackward = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      if (auto boxing = dyn_cast<BoxingOp>(user))
        return !readByForward(boxing.getResult(), false) && keptForBackward(boxing.getResult());
      return backward.contains(user);
    });
  };
  auto stashed = [&](Value v) {
    if (counted.insert(v).second)
      memory.stash += bytesOf(v) * sizes.storedShare(v);
  };
  auto held = [&](Value v) {
    if (counted.insert(v).second)
      memory.step += bytesOf(v);
  };
  double largest = 0, input = 0, gradients = 0;
  llvm::DenseSet<Value> readParams;
  for (Operation *op : ops) {
    double made = 0;
    for (Value result : op->getResults()) {
      made += bytesOf(result) * sizes.storedShare(result);
      // Kept on the stages whose forward reads it (a stage's input,
      // received), or here if no other part's does.
      if (keptForBackward(result) && !readByForward(result, /*elsewhere=*/true))
        stashed(result);
    }
    largest = std::max(largest, made);
    for (Value operand : op->getOperands()) {
      Value v = operand;
      // A copy in another layout: through the step where micro-batches
      // share it, else until the backward where that reads it too (a
      // parameter gathered for the forward is kept for the backward).
      while (auto boxing = v.getDefiningOp<BoxingOp>()) {
        Value copy = boxing.getResult();
        if (readAcrossMicroBatches(copy))
          held(copy);
        else if (keptForBackward(copy))
          stashed(copy);
        v = boxing.getInput();
      }
      // Made by another part (or from the inputs alone), read here and
      // kept for the backward.
      Operation *def = v.getDefiningOp();
      if (def && !here.contains(def)) {
        if (keptForBackward(v))
          stashed(v);
        input = std::max(input, bytesOf(operand));
      }
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg || isInput(arg))
        continue;
      if (readParams.insert(operand).second)
        gradients += bytesOf(operand);
      held(arg);
      // Its update's states and gradient sum (the update reading it as it
      // is or through boxings), on the first part that reads it, where
      // the update goes.
      if (!updatesCounted.insert(arg).second)
        continue;
      SmallVector<Value> reads = {arg};
      while (!reads.empty()) {
        Value read = reads.pop_back_val();
        for (Operation *user : read.getUsers()) {
          if (auto boxing = dyn_cast<BoxingOp>(user)) {
            reads.push_back(boxing.getResult());
            continue;
          }
          // (Updates that read it otherwise, as a step count, are others'.)
          std::optional<SmallVector<unsigned>> states = updateStateOperands(user);
          if (!states || user->getOperand(0) != read)
            continue;
          for (unsigned k : *states)
            held(user->getOperand(k));
          // The sum the update's gradient is sliced or changed from
          // (ZeRO's constraint, boxings) lives the whole step: its
          // largest form.
          Value gradient = user->getOperand(1);
          double most = bytesOf(gradient);
          while (Operation *from = gradient.getDefiningOp()) {
            if (!isa<BoxingOp, ConstraintOp>(from))
              break;
            gradient = from->getOperand(0);
            most = std::max(most, bytesOf(gradient));
          }
          if (counted.insert(gradient).second)
            memory.step += most;
        }
      }
    }
  }
  // Beside the stash, the backward of the op with the largest results
  // holds them (kept or recomputed), their gradient and its operands' (of
  // their size, as a softmax's), the gradients of the part's output and
  // input (each of its largest input's size, the residual stream's), and
  // a micro-batch's gradients of its parameters (as read) until they join
  // their sums; the forward's other values come and go.
  memory.working = 3 * largest + 2 * input + gradients;
  return memory;
}

LogicalResult StagePlacer::cut(ArrayRef<Operation *> ops, bool record) {
  // Units that are never cut: runs of ops of one block (graph.region).
  std::vector<std::pair<size_t, size_t>> units = pipelineCutUnits(ops);
  std::vector<double> seconds;
  std::vector<CutMemory> memory;
  llvm::DenseSet<Value> updatesCounted;
  for (auto [begin, end] : units) {
    double s = 0;
    for (size_t i = begin; i < end; ++i)
      s += secondsOf(ops[i]);
    seconds.push_back(s);
    memory.push_back(memoryOf(ops.slice(begin, end - begin), updatesCounted));
  }
  units_ = std::max(units_, units.size());
  Builder b(fn.getContext());
  // The chunks' estimates as cut, and (cut by time or memory) those of
  // the fastest cut.
  auto note = [&](const PipelineCut &cut) {
    if (!record)
      return;
    SmallVector<NamedAttribute> entries = {
        b.getNamedAttr("by", b.getStringAttr(cut.by)),
        b.getNamedAttr("bytes", b.getDenseF64ArrayAttr(cut.stageBytes(shape))),
        b.getNamedAttr("seconds", b.getDenseF64ArrayAttr(cut.seconds)),
        b.getNamedAttr("slowest_seconds", b.getF64FloatAttr(cut.slowestSeconds()))};
    if (cut.timeCut) {
      entries.push_back(
          b.getNamedAttr("time_cut_fullest_bytes", b.getF64FloatAttr(cut.timeCut->first)));
      entries.push_back(
          b.getNamedAttr("time_cut_slowest_seconds", b.getF64FloatAttr(cut.timeCut->second)));
    }
    if (shape.memoryLimit > 0)
      entries.push_back(b.getNamedAttr("memory_limit_bytes", b.getF64FloatAttr(shape.memoryLimit)));
    cutBy = b.getDictionaryAttr(entries);
  };
  if (starts.empty()) {
    PipelineCut cut = cutPipeline(shape, seconds, memory);
    for (auto [u, range] : llvm::enumerate(units))
      for (size_t o = range.first; o < range.second; ++o)
        stage[ops[o]] = cut.chunkOf[u];
    note(cut);
    return success();
  }
  // By hand: chunk g + 1 begins with the block named starts[g].
  std::vector<std::string> blocks;
  for (auto [begin, end] : units) {
    auto region = ops[begin]->getAttrOfType<StringAttr>(graph::GraphDialect::kRegionAttr);
    blocks.push_back(region ? region.str() : "");
  }
  if (std::string error = handCutError(blocks, starts.vec(), chunks > 1 ? "chunk" : "stage");
      !error.empty())
    return fn.emitOpError() << error;
  size_t matched = 0;
  std::vector<int64_t> chunkOf = handCutChunks(blocks, starts.vec(), matched);
  for (auto [u, range] : llvm::enumerate(units))
    for (size_t o = range.first; o < range.second; ++o)
      stage[ops[o]] = chunkOf[u];
  note(cutAt(shape, seconds, memory, std::move(chunkOf)));
  return success();
}

LogicalResult StagePlacer::schedulePipeline(int64_t microBatches) {
  Block &body = fn.getBody().front();
  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, size_t> index;
  for (Operation &op : body.without_terminator()) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  // Each op's step: a micro-batch's forward and backward by the schedule;
  // anything else (a sum over micro-batches, an update) as soon as what it
  // reads is ready; boxings and ops that read only arguments (constants,
  // ZeRO's gathers of parameters) just before their first reader.
  // Each chunk's forward and backward of a micro-batch take what the cost
  // model says of micro-batch 0's (the head's chunk is heavier than a
  // block's); where a chunk has no such work, a forward takes 1 and a
  // backward 2.
  std::vector<std::array<double, 2>> durations(parts, {0.0, 0.0});
  for (Operation *op : ops)
    if (auto mark = op->getAttrOfType<IntegerAttr>(kMicroBatch);
        mark && mark.getInt() == 0 && !op->hasAttr(graph::GraphDialect::kAccumulateAttr))
      durations[stage.lookup(op)][backward.contains(op)] += secondsOf(op);
  bool costed =
      llvm::all_of(durations, [](const std::array<double, 2> &d) { return d[0] > 0 && d[1] > 0; });
  std::optional<std::vector<std::array<double, 2>>> starts =
      pipelineStarts(pipelineOrder(schedule.str(), stages, chunks, microBatches), stages, chunks,
                     microBatches, costed ? &durations : nullptr);
  if (!starts) // the orders of PipelineSchedule.h never wait forever
    return fn.emitOpError() << "cannot be put in the " << schedule << " schedule: its stages "
                            << "would wait for each other forever";
  std::vector<double> step(ops.size(), 0);
  std::vector<bool> byReaders(ops.size(), false);
  for (auto [i, op] : llvm::enumerate(ops)) {
    int64_t s = stage.lookup(op);
    if (auto mark = op->getAttrOfType<IntegerAttr>(kMicroBatch);
        mark && !op->hasAttr(graph::GraphDialect::kAccumulateAttr) && !isa<BoxingOp>(op) &&
        mark.getInt() >= 0 && mark.getInt() < microBatches) {
      step[i] = (*starts)[mark.getInt() * parts + s][backward.contains(op)];
      continue;
    }
    bool readsOps = !isa<BoxingOp>(op) && llvm::any_of(op->getOperands(), [](Value v) {
      return v.getDefiningOp() != nullptr;
    });
    if (!readsOps) {
      byReaders[i] = true;
      continue;
    }
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        step[i] = std::max(step[i], step[index.lookup(def)]);
  }
  // Readers come later in the block: fill those in from the end.
  for (size_t i = ops.size(); i-- > 0;) {
    if (!byReaders[i])
      continue;
    std::optional<double> first;
    for (Operation *user : ops[i]->getUsers())
      if (auto found = index.find(user); found != index.end())
        first = first ? std::min(*first, step[found->second]) : step[found->second];
    step[i] = first.value_or(step[i]);
  }
  // A topological order by (step, original position): Kahn's algorithm
  // with the ready ops in a heap.
  std::vector<unsigned> waiting(ops.size(), 0);
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body)
        ++waiting[i];
  using Key = std::pair<double, size_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  for (size_t i = 0; i < ops.size(); ++i)
    if (waiting[i] == 0)
      ready.push({step[i], i});
  Operation *terminator = body.getTerminator();
  while (!ready.empty()) {
    size_t i = ready.top().second;
    ready.pop();
    ops[i]->moveBefore(terminator);
    for (OpOperand &use : ops[i]->getUses())
      if (auto found = index.find(use.getOwner());
          found != index.end() && --waiting[found->second] == 0)
        ready.push({step[found->second], found->second});
  }
  return success();
}

void StagePlacer::readerStages(Value v, llvm::function_ref<bool(Operation *)> counts,
                               std::set<int64_t> &into) const {
  SmallVector<Value> values = {v};
  while (!values.empty())
    for (Operation *user : values.pop_back_val().getUsers()) {
      if (auto boxing = dyn_cast<BoxingOp>(user))
        values.push_back(boxing.getResult());
      else if (std::optional<int64_t> s = stageOf(user); s && counts(user))
        into.insert(*s);
    }
}

void StagePlacer::improve(ArrayRef<Operation *> ops) {
  // Bytes a rank holds of a value.
  auto bytesOf = [&](Value v) -> double {
    std::optional<sbprt::NdSbp> layout = layoutOf(v);
    return layout ? static_cast<double>(localBytes(context.mesh, *layout, v, sizes.of(v))) : 0;
  };
  for (Operation *op : llvm::reverse(ops)) {
    std::set<int64_t> candidates = {stage.lookup(op)}, readers;
    for (Value result : op->getResults())
      readerStages(result, [](Operation *) { return true; }, readers);
    candidates.insert(readers.begin(), readers.end());
    // Where each operand already is: where it is made and read.
    std::vector<std::pair<std::set<int64_t>, double>> operands;
    for (Value operand : op->getOperands()) {
      Value v = source(operand);
      std::set<int64_t> where;
      if (Operation *def = v.getDefiningOp())
        if (std::optional<int64_t> s = stageOf(def))
          where.insert(*s);
      for (Operation *user : v.getUsers())
        if (user != op)
          if (std::optional<int64_t> s = stageOf(user))
            where.insert(*s);
      if (where.empty())
        continue; // an argument: loaded where it is read
      candidates.insert(where.begin(), where.end());
      operands.push_back({std::move(where), bytesOf(v)});
    }
    double resultBytes = 0;
    for (Value result : op->getResults())
      resultBytes += bytesOf(result);
    // The stage that sends the fewest bytes: operands to it, the result
    // from it to every other reader stage (chunks on one stage send
    // nothing between them). Ties keep the first choice.
    auto onStage = [&](const std::set<int64_t> &chunks, int64_t c) {
      return llvm::any_of(chunks, [&](int64_t k) { return k % stages == c % stages; });
    };
    std::set<int64_t> readerStages;
    for (int64_t r : readers)
      readerStages.insert(r % stages);
    auto cost = [&](int64_t c) {
      double bytes = 0;
      for (auto &[where, size] : operands)
        bytes += onStage(where, c) ? 0 : size;
      return bytes + resultBytes *
                         static_cast<double>(readerStages.size() - readerStages.count(c % stages));
    };
    int64_t best = stage.lookup(op);
    for (int64_t c : candidates)
      if (cost(c) < cost(best))
        best = c;
    stage[op] = best;
  }
}

void StagePlacer::splitFarSums(int64_t microBatches, SmallVectorImpl<Operation *> &gradientOnly,
                               SmallVectorImpl<Operation *> &floating) {
  auto isSum = [](Operation *op) {
    return isa_and_nonnull<graph::AddOp>(op) && op->hasAttr(graph::GraphDialect::kAccumulateAttr);
  };
  // The chains: from an add whose running sum is a term (micro-batch 0's),
  // each add read by the next alone.
  std::vector<std::vector<Operation *>> work;
  for (Operation &op : fn.getBody().front())
    if (isSum(&op) && !isSum(op.getOperand(0).getDefiningOp())) {
      std::vector<Operation *> chain = {&op};
      while (chain.back()->hasOneUse() && isSum(*chain.back()->user_begin()) &&
             chain.back()->user_begin()->getOperand(0) == chain.back()->getResult(0))
        chain.push_back(*chain.back()->user_begin());
      work.push_back(std::move(chain));
    }
  OpBuilder b(fn.getContext());
  while (!work.empty()) {
    std::vector<Operation *> chain = work.back();
    work.pop_back();
    SmallVector<Value> terms = {chain.front()->getOperand(0)};
    for (Operation *add : chain)
      terms.push_back(add->getOperand(1));
    // Every micro-batch's term (micro-batch i's the i-th) an add of this
    // step's backward of two values of its type, laid out as its operands,
    // read by the sum alone, directly (laid out as the sum) or through
    // boxings to the sum's layout, each read by the next alone (ZeRO-2 and
    // 3 reduce-scatter each micro-batch's gradient into the split sum);
    // whose operands come from the same two chunks, on different stages,
    // in every micro-batch. Each contribution then takes the same
    // boxings, as a partial sum's boxing of the add is the add of its
    // terms' boxings.
    auto layout = chain.front()->getAttrOfType<ArrayAttr>(kResultLayouts);
    std::optional<std::array<int64_t, 2>> from;
    std::vector<graph::AddOp> pairs;
    std::vector<SmallVector<BoxingOp>> boxings; // each term's, first first
    int64_t next = 0;
    bool splits =
        layout && layout.size() == 1 && static_cast<int64_t>(terms.size()) == microBatches &&
        llvm::all_of(terms, [&](Value term) {
          SmallVector<BoxingOp> changes;
          while (auto boxing = term.getDefiningOp<BoxingOp>()) {
            if (!term.hasOneUse())
              return false;
            changes.insert(changes.begin(), boxing);
            term = boxing.getInput();
          }
          auto add = term.getDefiningOp<graph::AddOp>();
          if (!add || isSum(add) || !term.hasOneUse() || add.getLhs().getType() != add.getType() ||
              add.getRhs().getType() != add.getType())
            return false;
          auto mark = add->getAttrOfType<IntegerAttr>(kMicroBatch);
          if (!mark || mark.getInt() != next++)
            return false;
          auto results = add->getAttrOfType<ArrayAttr>(kResultLayouts);
          auto operands = add->getAttrOfType<ArrayAttr>(kOperandLayouts);
          if (!results || results.size() != 1 || !operands || operands.size() != 2 ||
              llvm::any_of(operands, [&](Attribute a) { return a != results[0]; }))
            return false;
          if (changes.empty() ? results != layout
                              : changes.front().getFromAttr() != results[0] ||
                                    changes.back().getToAttr() != layout[0])
            return false;
          std::array<int64_t, 2> where;
          for (unsigned i = 0; i < 2; ++i) {
            std::optional<int64_t> s = stageOf(source(add->getOperand(i)).getDefiningOp());
            if (!s)
              return false;
            where[i] = *s;
          }
          if (where[0] % stages == where[1] % stages || (from && *from != where))
            return false;
          from = where;
          pairs.push_back(add);
          boxings.push_back(std::move(changes));
          return true;
        });
    if (!splits)
      continue;
    // One contribution of micro-batch i as the sum takes it: through
    // copies of the term's boxings, made where they were (boxings are
    // placed later, by their readers).
    auto contribution = [&](size_t i, unsigned side) {
      Value v = pairs[i]->getOperand(side);
      for (BoxingOp boxing : boxings[i]) {
        b.setInsertionPoint(boxing);
        Operation *copy = b.clone(*boxing);
        copy->setOperand(0, v);
        floating.push_back(copy);
        v = copy->getResult(0);
      }
      return v;
    };
    // Each contribution's sum, its adds beside the chain's, on its stage.
    Value sums[2];
    for (unsigned side = 0; side < 2; ++side) {
      std::vector<Operation *> adds;
      Value sum = contribution(0, side);
      for (auto [i, add] : llvm::enumerate(chain)) {
        Value term = contribution(i + 1, side);
        b.setInsertionPoint(add);
        Operation *next = b.create<graph::AddOp>(add->getLoc(), sum, term);
        next->setAttrs(add->getAttrDictionary());
        stage[next] = (*from)[side];
        adds.push_back(next);
        sum = next->getResult(0);
      }
      sums[side] = sum;
      work.push_back(std::move(adds)); // a contribution may add two others
    }
    Operation *last = chain.back();
    b.setInsertionPoint(last);
    Operation *both = b.create<graph::AddOp>(last->getLoc(), sums[0], sums[1]);
    both->setAttrs(last->getAttrDictionary());
    stage[both] = stage.lookup(last);
    gradientOnly.push_back(both);
    last->getResult(0).replaceAllUsesWith(both->getResult(0));
    // (Forgotten before the next chain's ops are made, which may take
    // their addresses.)
    llvm::DenseSet<Operation *> erased;
    auto erase = [&](Operation *op) {
      stage.erase(op);
      backward.erase(op);
      erased.insert(op);
      op->erase();
    };
    for (Operation *add : llvm::reverse(chain))
      erase(add);
    for (auto [pair, changes] : llvm::zip(pairs, boxings)) {
      for (BoxingOp boxing : llvm::reverse(changes))
        erase(boxing);
      erase(pair);
    }
    llvm::erase_if(gradientOnly, [&](Operation *op) { return erased.contains(op); });
    llvm::erase_if(floating, [&](Operation *op) { return erased.contains(op); });
  }
}

LogicalResult StagePlacer::run() {
  Block &body = fn.getBody().front();
  // The forward ops to cut, of the first micro-batch (the others follow
  // it); the backward, marked so or computed from something that is.
  // Forward ops computed from inputs and constants alone (a micro-batch's
  // slice of an input, a scale, a mask) are not cut: they go where they
  // are read; nor are the ops of a join whose pieces are stored as they
  // are made (StoredJoin): they go where the pieces are.
  PipelineCutOps cutOps = pipelineCutOps(fn, /*layoutsKnown=*/true, backward);
  const std::vector<std::vector<Operation *>> &forward = cutOps.perMicroBatch;
  auto isForward = [&](Operation *op) { return isForwardOp(op); };
  const int64_t microBatches = static_cast<int64_t>(microBatchOps(fn).size());
  if (schedule == "interleaved" && microBatches == 0)
    return fn.emitOpError() << "cannot be put in the interleaved schedule: it has no "
                            << "micro-batches to order (--sbp-micro-batches)";
  if (std::string error =
          pipelineScheduleError(schedule.str(), stages, chunks, std::max<int64_t>(1, microBatches));
      !error.empty())
    return fn.emitOpError() << "cannot be put on " << stages << " pipeline stages: " << error;
  // What each chunk and stage holds at once, for the cut's memory.
  shape = CutShape::of(schedule.str(), stages, chunks, microBatches, memoryLimit);
  if (failed(cut(forward[0], /*record=*/true)))
    return failure();
  for (size_t i = 1; i < forward.size(); ++i) {
    if (forward[i].size() != forward[0].size()) {
      if (failed(cut(forward[i], /*record=*/false)))
        return failure();
      continue;
    }
    for (auto [first, op] : llvm::zip(forward[0], forward[i]))
      stage[op] = stage[first];
  }
  // Each stage must have work: a model with fewer blocks than stages
  // would leave ranks idle.
  std::vector<bool> used(parts, false);
  for (auto &[op, s] : stage)
    used[s] = true;
  if (llvm::is_contained(used, false)) {
    InFlightDiagnostic error = fn.emitOpError() << "cannot be cut into ";
    if (chunks > 1)
      error << parts << " chunks (" << stages << " pipeline stages of " << chunks << "): ";
    else
      error << stages << " pipeline stages: ";
    if (units_ == 0)
      return error << "no forward op reads a parameter (only those, and whole blocks, are cut)";
    error << "its forward has " << units_ << " part" << (units_ == 1 ? "" : "s")
          << " to place (whole blocks, and ops outside blocks that read parameters); use ";
    if (chunks > 1)
      return error << "at most " << units_ << " chunks in all";
    return error << "at most " << units_ << " stage" << (units_ == 1 ? "" : "s");
  }

  // The stages of the forward ops that read `v`, through boxings.
  auto forwardReaders = [&](Value v, std::set<int64_t> &into) {
    readerStages(v, isForward, into);
  };
  // Forward ops of arguments alone: the lowest stage that reads them, the
  // last first so that a chain follows its reader.
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (cutOps.fromArguments.contains(&op)) {
      std::set<int64_t> readers;
      for (Value result : op.getResults())
        forwardReaders(result, readers);
      if (!readers.empty())
        stage[&op] = *readers.begin();
    }
  // Where the forward pass has each forward value: the stage that computes
  // it and those that read it (a parameter: those that read it).
  llvm::DenseMap<Value, std::set<int64_t>> holders;
  auto holdersOf = [&](Value v) -> const std::set<int64_t> & {
    auto [it, inserted] = holders.try_emplace(v);
    if (inserted) {
      Operation *def = v.getDefiningOp();
      if (def && !isForward(def))
        return it->second;
      if (std::optional<int64_t> s = stageOf(def))
        it->second.insert(*s);
      forwardReaders(v, it->second);
    }
    return it->second;
  };

  // Everything else, in program order: where the forward values it reads
  // all are (among those, where its backward operands come from, else the
  // latest: a backward op reads the inputs of the op it differentiates,
  // which that op's stage holds); without forward operands, the lowest
  // stage its backward operands come from.
  SmallVector<Operation *> floating, gradientOnly;
  for (Operation &op : body.without_terminator()) {
    if (stage.contains(&op))
      continue;
    if (isa<BoxingOp>(op)) {
      floating.push_back(&op);
      continue;
    }
    std::optional<std::set<int64_t>> common;
    std::optional<int64_t> fromBackward, latestForward;
    for (Value operand : op.getOperands()) {
      Value v = source(operand);
      Operation *def = v.getDefiningOp();
      if (!def || isForward(def)) {
        const std::set<int64_t> &where = holdersOf(v);
        if (where.empty())
          continue;
        latestForward = std::max(latestForward.value_or(0), *where.begin());
        if (!common) {
          common = where;
        } else {
          std::set<int64_t> both;
          std::set_intersection(common->begin(), common->end(), where.begin(), where.end(),
                                std::inserter(both, both.end()));
          common = both;
        }
      } else if (std::optional<int64_t> s = stageOf(def)) {
        fromBackward = fromBackward ? std::min(*fromBackward, *s) : *s;
      }
    }
    if (common && !common->empty())
      stage[&op] = fromBackward && common->count(*fromBackward) ? *fromBackward : *common->rbegin();
    else if (latestForward)
      stage[&op] = *latestForward;
    else if (fromBackward) {
      stage[&op] = *fromBackward;
      gradientOnly.push_back(&op);
    } else {
      floating.push_back(&op);
    }
  }
  splitFarSums(std::max<int64_t>(1, microBatches), gradientOnly, floating);
  improve(gradientOnly);
  // Boxings and constants: the lowest stage of their users (its lowest
  // chunk there), last first so that a chain of boxings follows its
  // consumer.
  auto lower = [&](int64_t a, int64_t b) {
    return std::make_pair(a % stages, a) < std::make_pair(b % stages, b);
  };
  for (Operation *op : llvm::reverse(floating)) {
    std::optional<int64_t> s;
    for (Operation *user : op->getUsers()) {
      std::optional<int64_t> u = stageOf(user);
      if (!u && isa<func::ReturnOp>(user) && op->getNumOperands() > 0)
        if (Operation *def = source(op->getOperand(0)).getDefiningOp())
          u = stageOf(def);
      if (u && (!s || lower(*u, *s)))
        s = u;
    }
    stage[op] = s.value_or(0);
  }

  MLIRContext *ctx = fn.getContext();
  auto i64 = IntegerType::get(ctx, 64);
  // Chunk c runs on stage c % stages.
  for (Operation &op : body.without_terminator())
    op.setAttr(kStage, IntegerAttr::get(i64, stage.lookup(&op) % stages));
  fn->setAttr(kFuncStages, IntegerAttr::get(i64, stages));
  if (chunks > 1)
    fn->setAttr(kFuncChunks, IntegerAttr::get(i64, chunks));
  if (cutBy)
    fn->setAttr(kFuncCut, cutBy);
  bool pipelined = microBatches > 0 && schedule != "sequential";
  if (pipelined && failed(schedulePipeline(microBatches)))
    return failure();
  fn->setAttr(kFuncSchedule, StringAttr::get(ctx, pipelined ? schedule : StringRef("sequential")));
  return success();
}

class SbpPipelineStagesPass
    : public sbpc::sbp::impl::SbpPipelineStagesBase<SbpPipelineStagesPass> {
public:
  using SbpPipelineStagesBase::SbpPipelineStagesBase;

  void runOnOperation() override {
    if (stages < 1) {
      getOperation().emitError() << "sbp-pipeline: stages must be at least 1, got "
                                 << stages.getValue();
      return signalPassFailure();
    }
    if (!isPipelineSchedule(schedule)) {
      getOperation().emitError() << "sbp-pipeline: schedule must be " << kPipelineSchedules
                                 << ", got '" << schedule << "'";
      return signalPassFailure();
    }
    // The micro-batches are checked against the schedule per function.
    if (std::string error = pipelineScheduleError(schedule, stages, chunks, stages);
        !error.empty()) {
      getOperation().emitError() << "sbp-pipeline: " << error;
      return signalPassFailure();
    }
    int64_t parts = stages * chunks;
    const char *part = chunks > 1 ? "chunk" : "stage";
    if (!starts.empty() && static_cast<int64_t>(starts.size()) != parts - 1) {
      getOperation().emitError() << "sbp-pipeline: starts names " << starts.size() << " block"
                                 << (starts.size() == 1 ? "" : "s") << " for " << parts << " "
                                 << part << "s; it takes one per " << part << " after the first ("
                                 << parts - 1 << ")";
      return signalPassFailure();
    }
    if (stages == 1)
      return;
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) -> LogicalResult {
                                 if (!fn->hasAttr(kFuncMesh))
                                   return fn.emitOpError()
                                          << "has no layouts; run --sbp-propagate (or "
                                             "--sbp-search) and --sbp-insert-boxing first";
                                 return StagePlacer(fn, context, stages, chunks, schedule, starts,
                                                    balanceMemory)
                                     .run();
                               })))
      return signalPassFailure();
  }
};

} // namespace
