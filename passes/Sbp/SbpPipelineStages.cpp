// --sbp-pipeline: places a laid-out function's ops on pipeline stages.
//
// Every stage runs on a sub-mesh of the function's mesh shape, and a value
// keeps its layout on every stage, so a value that crosses from one stage
// to another goes rank to rank unchanged (--sbp-spmdize makes the sends
// and receives). What is left to choose is which stage computes each op:
//
// - The forward ops are cut, in program order, into stages of about equal
//   compute time (the cost model's, on the ops' local shapes). A block of
//   the model (graph.region: a transformer layer) is never cut: it goes
//   where its midpoint falls. With micro-batches the first micro-batch is
//   cut and every later one follows it op for op. Forward ops computed
//   from inputs and constants alone (a micro-batch's slice of an input, a
//   mask) are not cut: they go to the lowest stage that reads them.
// - Any other op (the backward, sums over micro-batches, updates) goes
//   where the forward values it reads all are, a value being where it is
//   computed and where forward ops read it (a backward op reads the inputs
//   of the op it differentiates, which that op's stage holds): among those
//   stages, the one its backward operands come from, else the last.
//   Without forward operands, the lowest stage its backward operands come
//   from (gradients flow towards the first stage).
// - Boxings, and ops that read nothing staged (constants), go to the
//   lowest stage of their users, so that a value is sent as it was
//   computed and changed where it is needed.
//
// With micro-batches, the ops are then reordered into GPipe's schedule:
// every stage runs the forward of micro-batch m at step m + s (so while
// stage 1 computes micro-batch 0, stage 0 computes micro-batch 1), and the
// backward in the same order from the last stage down. Every rank meets its
// sends, receives and collectives in this one order, which --sbp-spmdize
// keeps. `schedule=sequential` keeps the micro-batches one after another
// (one micro-batch's activations live at a time, but the stages wait for
// each other).
#include "compiler/Sbp/ValueLayouts.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Sbp/Passes.h"

#include "mlir/IR/Builders.h"

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
  StagePlacer(func::FuncOp fn, LayoutContext &context, int64_t stages, StringRef schedule)
      : fn(fn), context(context), stages(stages), schedule(schedule), sizes(fn) {}
  LogicalResult run();

private:
  bool isBackwardValue(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && backward.contains(def);
  }
  /// Follows boxings back to the value they change.
  static Value source(Value v) {
    while (auto boxing = v.getDefiningOp<BoxingOp>())
      v = boxing.getInput();
    return v;
  }
  double secondsOf(Operation *op);
  /// Cuts `ops` (forward ops in program order) into the stages.
  void cut(ArrayRef<Operation *> ops);
  /// Reorders the ops into GPipe's schedule (see the top of the file).
  void scheduleGPipe(int64_t microBatches);
  std::optional<int64_t> stageOf(Operation *op) const {
    auto found = stage.find(op);
    return found == stage.end() ? std::nullopt : std::optional(found->second);
  }

  func::FuncOp fn;
  LayoutContext &context;
  int64_t stages;
  StringRef schedule;
  ElementSizes sizes;
  llvm::DenseSet<Operation *> backward;
  llvm::DenseMap<Operation *, int64_t> stage;
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

void StagePlacer::cut(ArrayRef<Operation *> ops) {
  // Units that are never cut: runs of ops of one block (graph.region).
  std::vector<std::pair<size_t, size_t>> units; // [begin, end) in ops
  for (size_t i = 0; i < ops.size(); ++i) {
    auto region = ops[i]->getAttrOfType<StringAttr>(graph::GraphDialect::kRegionAttr);
    auto prev = i ? ops[i - 1]->getAttrOfType<StringAttr>(graph::GraphDialect::kRegionAttr)
                  : StringAttr();
    if (i > 0 && region && region == prev)
      units.back().second = i + 1;
    else
      units.push_back({i, i + 1});
  }
  std::vector<double> seconds;
  double total = 0;
  for (auto [begin, end] : units) {
    double s = 0;
    for (size_t i = begin; i < end; ++i)
      s += secondsOf(ops[i]);
    seconds.push_back(s);
    total += s;
  }
  // Each unit goes where its midpoint falls; units of no time (reshapes)
  // by their position among the units when nothing takes time at all.
  double before = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    double mid = total > 0 ? (before + seconds[u] / 2) / total
                           : (static_cast<double>(u) + 0.5) / static_cast<double>(units.size());
    before += seconds[u];
    int64_t s = std::min<int64_t>(stages - 1, static_cast<int64_t>(mid * static_cast<double>(stages)));
    for (size_t i = units[u].first; i < units[u].second; ++i)
      stage[ops[i]] = s;
  }
}

void StagePlacer::scheduleGPipe(int64_t microBatches) {
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
  const int64_t last = stages - 1, backwardStart = microBatches + last;
  std::vector<int64_t> step(ops.size(), 0);
  std::vector<bool> byReaders(ops.size(), false);
  for (auto [i, op] : llvm::enumerate(ops)) {
    int64_t s = stage.lookup(op);
    if (auto mark = op->getAttrOfType<IntegerAttr>(kMicroBatch);
        mark && !op->hasAttr(graph::GraphDialect::kAccumulateAttr) && !isa<BoxingOp>(op)) {
      int64_t m = mark.getInt();
      step[i] = backward.contains(op) ? backwardStart + m + (last - s) : m + s;
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
    std::optional<int64_t> first;
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
  using Key = std::pair<int64_t, size_t>;
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
}

LogicalResult StagePlacer::run() {
  Block &body = fn.getBody().front();
  // Backward: marked so, or computed from something that is.
  for (Operation &op : body.without_terminator())
    if (op.hasAttr(graph::GraphDialect::kBackwardAttr) ||
        llvm::any_of(op.getOperands(), [&](Value v) { return isBackwardValue(v); }))
      backward.insert(&op);
  auto isForward = [&](Operation *op) {
    return !backward.contains(op) && !isa<BoxingOp, ConstraintOp>(op) &&
           !op->hasAttr(graph::GraphDialect::kAccumulateAttr);
  };
  // Forward ops computed from inputs and constants alone (a micro-batch's
  // slice of an input, a scale, a mask) are not cut: they go where they
  // are read.
  llvm::DenseSet<Operation *> fromArguments;
  for (Operation &op : body.without_terminator())
    if (isForward(&op) && llvm::all_of(op.getOperands(), [&](Value v) {
          if (auto arg = dyn_cast<BlockArgument>(v))
            return !!fn.getArgAttr(arg.getArgNumber(), graph::GraphDialect::kInputAttr);
          return fromArguments.contains(v.getDefiningOp());
        }))
      fromArguments.insert(&op);
  auto isCut = [&](Operation *op) { return isForward(op) && !fromArguments.contains(op); };

  // The forward ops: of the first micro-batch, the others following it.
  std::vector<std::vector<Operation *>> batches = microBatchOps(fn);
  if (batches.empty()) {
    std::vector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      if (isCut(&op))
        forward.push_back(&op);
    cut(forward);
  } else {
    std::vector<std::vector<Operation *>> forward(batches.size());
    for (auto [i, ops] : llvm::enumerate(batches))
      for (Operation *op : ops)
        if (isCut(op))
          forward[i].push_back(op);
    cut(forward[0]);
    for (size_t i = 1; i < forward.size(); ++i) {
      if (forward[i].size() != forward[0].size()) {
        cut(forward[i]);
        continue;
      }
      for (auto [first, op] : llvm::zip(forward[0], forward[i]))
        stage[op] = stage[first];
    }
  }
  // Each stage must have work: a model with fewer blocks than stages
  // would leave ranks idle.
  std::vector<bool> used(stages, false);
  for (auto &[op, s] : stage)
    used[s] = true;
  if (auto idle = llvm::find(used, false); idle != used.end())
    return fn.emitOpError() << "cannot be cut into " << stages << " pipeline stages: stage "
                            << (idle - used.begin())
                            << " would have no forward op (the model has too few blocks); use "
                               "fewer stages";

  // The stages of the forward ops that read `v`, through boxings.
  auto forwardReaders = [&](Value v, std::set<int64_t> &into) {
    SmallVector<Value> values = {v};
    while (!values.empty()) {
      Value value = values.pop_back_val();
      for (Operation *user : value.getUsers()) {
        if (auto boxing = dyn_cast<BoxingOp>(user))
          values.push_back(boxing.getResult());
        else if (std::optional<int64_t> s = stageOf(user); s && isForward(user))
          into.insert(*s);
      }
    }
  };
  // Forward ops of arguments alone: the lowest stage that reads them, the
  // last first so that a chain follows its reader.
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (fromArguments.contains(&op)) {
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
  SmallVector<Operation *> floating;
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
    else if (fromBackward)
      stage[&op] = *fromBackward;
    else
      floating.push_back(&op);
  }
  // Boxings and constants: the lowest stage of their users, last first so
  // that a chain of boxings follows its consumer.
  for (Operation *op : llvm::reverse(floating)) {
    std::optional<int64_t> s;
    for (Operation *user : op->getUsers()) {
      std::optional<int64_t> u = stageOf(user);
      if (!u && isa<func::ReturnOp>(user) && op->getNumOperands() > 0)
        if (Operation *def = source(op->getOperand(0)).getDefiningOp())
          u = stageOf(def);
      if (u)
        s = s ? std::min(*s, *u) : *u;
    }
    stage[op] = s.value_or(0);
  }

  MLIRContext *ctx = fn.getContext();
  auto i64 = IntegerType::get(ctx, 64);
  for (Operation &op : body.without_terminator())
    op.setAttr(kStage, IntegerAttr::get(i64, stage.lookup(&op)));
  fn->setAttr(kFuncStages, IntegerAttr::get(i64, stages));
  bool gpipe = !batches.empty() && schedule == "gpipe";
  if (gpipe)
    scheduleGPipe(static_cast<int64_t>(batches.size()));
  fn->setAttr(kFuncSchedule, StringAttr::get(ctx, gpipe ? "gpipe" : "sequential"));
  return success();
}

class SbpPipelineStagesPass
    : public sbpc::sbp::impl::SbpPipelineStagesBase<SbpPipelineStagesPass> {
public:
  using SbpPipelineStagesBase::SbpPipelineStagesBase;

  void runOnOperation() override {
    if (stages < 1) {
      getOperation().emitError() << "sbp-pipeline: stages must be at least 1, got " << stages;
      return signalPassFailure();
    }
    if (schedule != "gpipe" && schedule != "sequential") {
      getOperation().emitError() << "sbp-pipeline: schedule must be gpipe or sequential, got '"
                                 << schedule << "'";
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
                                 return StagePlacer(fn, context, stages, schedule).run();
                               })))
      return signalPassFailure();
  }
};

} // namespace
