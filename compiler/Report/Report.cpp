// Building report.json from a laid-out module.
//
// Per op: its chosen layouts and its compute time on local shapes. Per
// boxing: the plan insert-boxing recorded and its α-β time. Totals add
// them up without overlap; memory is parameters and inputs for the whole
// step plus the peak of live activations, all on local shapes, leaving out
// what flash attention never stores (an estimate: the compiled programs'
// arena is in totals.arena_bytes_per_rank).
#include "compiler/Report/Report.h"

#include "compiler/Sbp/Signatures.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "compiler/Sbp/ValueLayouts.h"

#include "runtime/Tensor.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"

#include "mlir/IR/AsmState.h"

#include <map>
#include <unordered_map>

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;

namespace {

/// How values are named in the report: model arguments by their names,
/// other values as in the printed module (%12).
class ValueNames {
public:
  ValueNames(func::FuncOp fn) : state(fn) {
    for (BlockArgument arg : fn.getArguments())
      for (StringRef attr : {graph::GraphDialect::kParamAttr, graph::GraphDialect::kInputAttr})
        if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr))
          args[arg] = name.str();
  }
  std::string operator()(Value v) {
    auto it = args.find(v);
    if (it != args.end())
      return it->second;
    std::string text;
    llvm::raw_string_ostream os(text);
    v.printAsOperand(os, state);
    return text;
  }

private:
  AsmState state;
  llvm::DenseMap<Value, std::string> args;
};

/// The peak of values live from their op until after a given op, and, to
/// say what makes it, which values those were (steps number the ops in
/// block order).
struct Peak {
  struct Held {
    Value value;
    double bytes;
    size_t from, until;
  };
  double live = 0, peak = 0;
  size_t peakStep = 0;
  mlir::Operation *peakOp = nullptr; // whose results (or reading) make the peak
  llvm::DenseMap<Operation *, double> freedAfter;
  std::vector<Held> held;
  /// `bytes` of `value` made (or, `at` another stage's op that reads it,
  /// received) at step `now`, freed after `last` (at step `until`).
  void add(Value value, double bytes, size_t now, Operation *last, size_t until,
           Operation *at = nullptr) {
    live += bytes;
    freedAfter[last] += bytes;
    if (bytes > 0)
      held.push_back({value, bytes, now, until});
    if (live > peak) {
      peak = live;
      peakStep = now;
      peakOp = at ? at : value.getDefiningOp();
    }
  }
  /// After `op`: what it was the last to read dies.
  void after(Operation *op) { live -= freedAfter.lookup(op); }
  /// The `count` largest values live at the peak, largest first.
  std::vector<Held> largestAtPeak(size_t count) const {
    std::vector<Held> live;
    for (const Held &h : held)
      if (h.from <= peakStep && peakStep <= h.until)
        live.push_back(h);
    std::stable_sort(live.begin(), live.end(),
                     [](const Held &a, const Held &b) { return a.bytes > b.bytes; });
    if (live.size() > count)
      live.resize(count);
    return live;
  }
};

/// The micro-batch an op was made for (sbp.micro_batch); a boxing's is its
/// consumers', where they agree. 0 for the first micro-batch's ops and
/// for ops outside micro-batches.
int64_t microBatchOf(Operation *op) {
  if (isa<BoxingOp>(op)) {
    std::optional<int64_t> common;
    for (Operation *user : op->getUsers()) {
      int64_t mb = microBatchOf(user);
      if (common && *common != mb)
        return 0;
      common = mb;
    }
    return common.value_or(0);
  }
  auto mark = op->getAttrOfType<IntegerAttr>(kMicroBatch);
  return mark ? mark.getInt() : 0;
}

/// What two report entries may differ in and still fold: `fields` that name
/// values, `value` in their operands and results, and the folding's own
/// counts (an entry folded into already has `micro_batches`; a later
/// micro-batch's that folded into none, `micro_batch`).
struct Nameless {
  std::initializer_list<const char *> fields;

  bool names(const std::string &key) const {
    return key == "micro_batches" || key == "micro_batch" ||
           llvm::any_of(fields, [&](const char *field) { return key == field; });
  }
  static bool isList(const std::string &key) { return key == "operands" || key == "results"; }

  /// A hash of `entry` but for its names (no copy: a step's report has
  /// hundreds of thousands of entries).
  size_t hash(const nlohmann::json &entry) const {
    size_t seed = 0;
    auto mix = [&](size_t h) { seed ^= h + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2); };
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      if (names(it.key()))
        continue;
      mix(std::hash<std::string>()(it.key()));
      if (!isList(it.key())) {
        mix(std::hash<nlohmann::json>()(it.value()));
        continue;
      }
      for (const nlohmann::json &layout : it.value())
        for (auto field = layout.begin(); field != layout.end(); ++field)
          if (field.key() != "value")
            mix(std::hash<nlohmann::json>()(field.value()));
    }
    return seed;
  }

  /// Whether two entries are the same but for their names.
  bool alike(const nlohmann::json &a, const nlohmann::json &b) const {
    auto fieldsOf = [&](const nlohmann::json &entry) {
      size_t count = 0;
      for (auto it = entry.begin(); it != entry.end(); ++it)
        count += !names(it.key());
      return count;
    };
    if (fieldsOf(a) != fieldsOf(b))
      return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (names(it.key()))
        continue;
      auto other = b.find(it.key());
      if (other == b.end())
        return false;
      if (!isList(it.key())) {
        if (it.value() != *other)
          return false;
        continue;
      }
      if (it.value().size() != other->size())
        return false;
      for (size_t i = 0; i < it.value().size(); ++i) {
        const nlohmann::json &x = it.value()[i], &y = (*other)[i];
        if (x.size() != y.size())
          return false;
        for (auto field = x.begin(); field != x.end(); ++field)
          if (field.key() != "value" && (!y.contains(field.key()) || y[field.key()] != field.value()))
            return false;
      }
    }
    return true;
  }
};

/// Appends report entries to a list, folding an op (or boxing) of a later
/// micro-batch into the same one of an earlier micro-batch: the k-th entry
/// of micro-batch i alike to others (the same but for value names) folds
/// into the k-th such entry of the list, which counts it in
/// `micro_batches`. An entry that folds into none keeps its
/// `micro_batch`. A step of N micro-batches then lists about one
/// micro-batch's ops, not N.
class MicroBatchFolder {
public:
  /// Folds only where `folding` (a micro-batched step): elsewhere every
  /// entry is listed, at no cost.
  MicroBatchFolder(nlohmann::json &list, bool folding) : list(list), folding(folding) {}

  /// `nameless` are the fields of `entry` that name values: it folds into
  /// an entry alike but for those. `print`, when not kNoPrint, stands for
  /// everything the entry is made of but names (see fold).
  void add(nlohmann::json entry, std::initializer_list<const char *> nameless,
           int64_t microBatch, size_t print = kNoPrint) {
    if (!folding) {
      list.push_back(std::move(entry));
      return;
    }
    Nameless names{nameless};
    size_t hash = names.hash(entry);
    std::vector<size_t> &similar = anchors[hash];
    if (print != kNoPrint)
      similarOfPrint[print] = {hash, &similar};
    if (microBatch > 0) {
      size_t k = seen[{microBatch, hash}]++;
      if (k < similar.size() && names.alike(list[similar[k]], entry)) {
        ++folded[similar[k]];
        return;
      }
      entry["micro_batch"] = microBatch;
    }
    similar.push_back(list.size());
    printOfEntry.push_back(print);
    auto time = entry.find("est_time_s");
    timeOfEntry.push_back(time != entry.end() && time->is_number() ? time->get<double>() : 0.0);
    folded.push_back(0);
    list.push_back(std::move(entry));
  }

  /// Folds, without its entry, a later micro-batch's op whose `print` (all
  /// its entry is made of but names) is that of the entry add would fold
  /// it into, which it then alike is; that entry's time (`est_time_s`)
  /// into `seconds`. False where add must see the entry.
  bool fold(size_t print, int64_t microBatch, double &seconds) {
    if (!folding || microBatch <= 0 || print == kNoPrint)
      return false;
    auto found = similarOfPrint.find(print);
    if (found == similarOfPrint.end())
      return false;
    const auto &[hash, similar] = found->second;
    size_t &count = seen[{microBatch, hash}];
    if (count >= similar->size() || printOfEntry[(*similar)[count]] != print)
      return false;
    size_t anchor = (*similar)[count++];
    ++folded[anchor];
    seconds = timeOfEntry[anchor];
    return true;
  }

  /// Writes how many micro-batches each entry stands for (`micro_batches`,
  /// where more than its own), once all are added.
  void finish() {
    for (size_t i = 0; i < folded.size(); ++i)
      if (folded[i])
        list[i]["micro_batches"] = folded[i] + 1;
  }

  static constexpr size_t kNoPrint = std::numeric_limits<size_t>::max();

private:
  nlohmann::json &list;
  bool folding;
  std::unordered_map<size_t, std::vector<size_t>> anchors; // hash -> entries
  struct PairHash {
    size_t operator()(const std::pair<int64_t, size_t> &key) const {
      return llvm::hash_combine(key.first, key.second);
    }
  };
  std::unordered_map<std::pair<int64_t, size_t>, size_t, PairHash> seen; // (micro-batch, hash) -> entries
  std::vector<size_t> printOfEntry;                        // entry -> its print
  std::vector<double> timeOfEntry;                         // entry -> its est_time_s
  std::vector<int64_t> folded;                             // entry -> copies folded into it
  // print -> its entries' hash and their list in anchors
  std::unordered_map<size_t, std::pair<size_t, const std::vector<size_t> *>> similarOfPrint;
};

/// Numbers for keys (vectors of pointers and numbers as pointers): equal
/// keys, equal numbers.
class Prints {
public:
  size_t of(std::vector<const void *> key) {
    return prints.try_emplace(std::move(key), prints.size()).first->second;
  }
  static const void *number(double x) {
    return reinterpret_cast<const void *>(static_cast<uintptr_t>(llvm::bit_cast<uint64_t>(x)));
  }

private:
  struct Hash {
    size_t operator()(const std::vector<const void *> &key) const {
      return llvm::hash_combine_range(key.begin(), key.end());
    }
  };
  std::unordered_map<std::vector<const void *>, size_t, Hash> prints;
};

/// Everything an op's report entry is made of but value names, as a
/// number: what its signatures and time depend on (signatureKey), its
/// location, its layouts and the element sizes and stored shares of what
/// it reads and writes. Ops with the same print have entries alike.
class OpPrints {
public:
  size_t of(Operation *op, ArrayAttr operands, ArrayAttr results, const ElementSizes &sizes) {
    std::vector<const void *> key = signatureKey(op);
    auto number = &Prints::number;
    key.push_back(op->getLoc().getAsOpaquePointer());
    key.push_back(operands.getAsOpaquePointer());
    key.push_back(results.getAsOpaquePointer());
    key.push_back(number(sizes.computesInBf16(op)));
    for (OpOperand &use : op->getOpOperands()) {
      key.push_back(number(static_cast<double>(sizes.ofUse(use))));
      key.push_back(number(sizes.storedShare(use.get())));
    }
    for (Value result : op->getResults()) {
      key.push_back(number(static_cast<double>(sizes.of(result))));
      key.push_back(number(sizes.storedShare(result)));
    }
    return prints.of(std::move(key));
  }

private:
  Prints prints;
};

/// The same for a boxing: its value's type and every attribute its entry
/// is made of (the plan's time depends on the type, layouts and element
/// size alone).
class BoxingPrints {
public:
  size_t of(BoxingOp boxing) {
    return prints.of({boxing.getInput().getType().getAsOpaquePointer(),
                      boxing.getFrom().getAsOpaquePointer(), boxing.getTo().getAsOpaquePointer(),
                      boxing.getCollectiveAttr().getAsOpaquePointer(),
                      boxing.getMeshAxesAttr().getAsOpaquePointer(),
                      boxing.getBytesPerRankAttr().getAsOpaquePointer(),
                      boxing.getReasonAttr().getAsOpaquePointer(),
                      boxing->getLoc().getAsOpaquePointer(),
                      Prints::number(static_cast<double>(elementBytes(boxing)))});
  }

private:
  Prints prints;
};

nlohmann::json layoutEntry(ValueNames &names, Value v, const sbprt::NdSbp &layout) {
  return {{"value", names(v)}, {"shape", shapeOf(v)}, {"sbp", sbprt::toString(layout)}};
}

} // namespace

nlohmann::json sbpc::buildReport(ModuleOp module, const ReportInputs &inputs) {
  MeshOp meshOp = *findMesh(module);
  sbprt::Mesh mesh = meshOp.toMesh();
  BoxingPlans plans(mesh, inputs.cluster);
  nlohmann::json ops = nlohmann::json::array(), boxings = nlohmann::json::array();
  bool microBatched = false;
  module.walk([&](Operation *op) { microBatched |= op->hasAttr(kMicroBatch); });
  MicroBatchFolder opList(ops, microBatched), boxingList(boxings, microBatched);
  OpPrints opPrints;
  BoxingPrints boxingPrints;
  nlohmann::json search = {{"algorithm", inputs.algorithm}, {"wall_seconds", inputs.searchSeconds}};
  nlohmann::json zero;
  // Per pipeline stage (one without stages): compute and communication,
  // and the peak of live activations; and as if every value were stored,
  // where flash attention's cores are not.
  struct StageTotals {
    double compute = 0, comm = 0, commBytes = 0, argBytes = 0;
    Peak activations, unfused;
    /// The model's blocks (graph.region) its ops belong to, in order.
    std::vector<std::string> blocks;
    llvm::StringSet<> seenBlocks;
  };
  std::vector<StageTotals> stage(1);
  // Every op of every function numbered in walk order, to say which
  // values are live at a peak.
  llvm::DenseMap<Operation *, size_t> stepOfOp;
  llvm::DenseMap<Operation *, std::unique_ptr<ValueNames>> namesOf;
  nlohmann::json transfers = nlohmann::json::array();
  std::string schedule = "sequential";
  int64_t chunks = 1; // model chunks per stage (the interleaved schedule)
  DictionaryAttr cutBy; // what --sbp-pipeline cut the stages by
  size_t microBatches = 1;
  bool fusedAttention = false;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    ValueNames &names = *namesOf.try_emplace(fn, std::make_unique<ValueNames>(fn)).first->second;
    if (auto stages = fn->getAttrOfType<IntegerAttr>(kFuncStages))
      stage.resize(std::max<int64_t>(1, stages.getInt()));
    if (auto order = fn->getAttrOfType<StringAttr>(kFuncSchedule))
      schedule = order.str();
    if (auto held = fn->getAttrOfType<IntegerAttr>(kFuncChunks))
      chunks = std::max<int64_t>(1, held.getInt());
    if (auto by = fn->getAttrOfType<DictionaryAttr>(kFuncCut))
      cutBy = by;
    microBatches = std::max<size_t>(1, microBatchOps(fn).size());
    // A stage sends what it computes to the rank at the same coordinates
    // of each stage that reads it, over the pipeline axis's link.
    sbprt::Mesh full = mesh;
    full.axes.insert(full.axes.begin(), kPipelineAxis.str());
    full.shape.insert(full.shape.begin(), static_cast<int64_t>(stage.size()));
    const Link &pipelineLink = inputs.cluster.linkOf(full, 0);
    // What --sbp-search recorded.
    if (auto details = fn->getAttrOfType<DictionaryAttr>(kFuncSearch))
      for (NamedAttribute entry : details) {
        if (auto text = dyn_cast<StringAttr>(entry.getValue()))
          search[entry.getName().str()] = text.str();
        else if (auto integer = dyn_cast<IntegerAttr>(entry.getValue()))
          search[entry.getName().str()] = integer.getInt();
        else if (auto real = dyn_cast<FloatAttr>(entry.getValue()))
          search[entry.getName().str()] = real.getValueAsDouble();
      }
    // What --sbp-zero recorded (training steps).
    if (auto details = fn->getAttrOfType<DictionaryAttr>(kFuncZero)) {
      for (NamedAttribute entry : details) {
        if (auto integer = dyn_cast<IntegerAttr>(entry.getValue()))
          zero[entry.getName().str()] = integer.getInt();
        else if (auto list = dyn_cast<ArrayAttr>(entry.getValue()))
          zero[entry.getName().str()] = llvm::to_vector(
              llvm::map_range(list.getAsValueRange<StringAttr>(), [](StringRef s) { return s.str(); }));
      }
      // int64_t defaults: an int would truncate the sum past 2 GiB.
      zero["model_state_bytes_per_rank"] = zero.value("param_bytes_per_rank", int64_t{0}) +
                                           zero.value("gradient_bytes_per_rank", int64_t{0}) +
                                           zero.value("optimizer_state_bytes_per_rank", int64_t{0});
    }
    ElementSizes sizes(fn);
    for (BlockArgument arg : fn.getArguments())
      if (std::optional<sbprt::NdSbp> layout = layoutOf(arg))
        for (size_t s = 0; s < stage.size(); ++s)
          if (stageLoads(arg, static_cast<int64_t>(s)))
            stage[s].argBytes += static_cast<double>(localBytes(mesh, *layout, arg, sizes.of(arg)));
    fusedAttention |= sizes.attention() && !sizes.attention()->cores.empty();
    // Activations live from their op to their last use.
    for (Operation &op : fn.getBody().front())
      stepOfOp.try_emplace(&op, stepOfOp.size());
    // A value held on `holder` from `now` until the last op there that
    // reads it (or `op`, its producer, where none does).
    auto hold = [&](int64_t holder, Value result, double bytes, Operation *op, size_t now) {
      StageTotals &on = stage[std::min<size_t>(holder, stage.size() - 1)];
      Operation *last = nullptr;
      for (Operation *user : result.getUsers())
        if (!isa<func::ReturnOp>(user) && !isStoredJoin(user) && stageOf(user) == holder &&
            (!last || last->isBeforeInBlock(user)))
          last = user;
      on.unfused.add(result, bytes, now, last ? last : op, last ? stepOfOp.lookup(last) : now, op);
      // A fused backward reads its forward's output and log-sum-exp again
      // (on the stage that runs it).
      if (Operation *until = sizes.livesUntil(result))
        if ((!last || last->isBeforeInBlock(until)) && stageOf(until) == holder)
          last = until;
      on.activations.add(result, bytes * sizes.storedShare(result), now, last ? last : op,
                         last ? stepOfOp.lookup(last) : now, op);
    };
    // Values another stage receives, by the op there that first reads them:
    // the receive comes just before it (--sbp-spmdize).
    llvm::DenseMap<Operation *, std::vector<std::tuple<int64_t, Value, double>>> arrivals;
    for (Operation &op : fn.getBody().front()) {
      StageTotals &here = stage[std::min<size_t>(stageOf(&op), stage.size() - 1)];
      if (auto region = op.getAttrOfType<StringAttr>(graph::GraphDialect::kRegionAttr))
        if (here.seenBlocks.insert(region.getValue()).second)
          here.blocks.push_back(region.str());
      if (auto arriving = arrivals.find(&op); arriving != arrivals.end())
        for (auto &[holder, value, bytes] : arriving->second)
          hold(holder, value, bytes, &op, stepOfOp.lookup(&op));
      if (auto boxing = dyn_cast<BoxingOp>(op)) {
        // As for ops below: a later micro-batch's boxing folds without its
        // entry where one alike stands for it.
        int64_t microBatch = microBatchOf(&op);
        size_t print = microBatched ? boxingPrints.of(boxing) : MicroBatchFolder::kNoPrint;
        here.commBytes += static_cast<double>(boxing.getBytesPerRank().value_or(0));
        if (double folded; boxingList.fold(print, microBatch, folded)) {
          here.comm += folded;
        } else {
          sbprt::NdSbp from = boxing.getFrom().toLayout(), to = boxing.getTo().toLayout();
          const BoxingPlan &plan = plans.get(boxing.getInput(), from, to, elementBytes(boxing));
          std::vector<std::string> axes;
          if (auto attr = boxing.getMeshAxes())
            for (StringRef axis : attr->getAsValueRange<StringAttr>())
              axes.push_back(axis.str());
          nlohmann::json entry = {{"value", names(boxing.getInput())},
                                  {"result", names(boxing.getResult())},
                                  {"shape", shapeOf(boxing.getInput())},
                                  {"from", sbprt::toString(from)},
                                  {"to", sbprt::toString(to)},
                                  {"collective", boxing.getCollective().value_or("none").str()},
                                  {"mesh_axes", axes},
                                  {"element_bytes", elementBytes(boxing)},
                                  {"bytes_per_rank", boxing.getBytesPerRank().value_or(0)},
                                  {"est_time_s", plan.seconds},
                                  {"location", describeLocation(op.getLoc())},
                                  {"reason", boxing.getReason().value_or("").str()}};
          if (stage.size() > 1)
            entry["stage"] = stageOf(&op);
          boxingList.add(std::move(entry), {"value", "result"}, microBatch, print);
          here.comm += plan.seconds;
        }
      } else if (auto operandLayouts = op.getAttrOfType<ArrayAttr>(kOperandLayouts)) {
        auto resultLayouts = op.getAttrOfType<ArrayAttr>(kResultLayouts);
        // A later micro-batch's op folds without its entry where one alike
        // in all but names stands for it (most of a micro-batched step).
        int64_t microBatch = microBatchOf(&op);
        size_t print = microBatched ? opPrints.of(&op, operandLayouts, resultLayouts, sizes)
                                    : MicroBatchFolder::kNoPrint;
        if (double folded; opList.fold(print, microBatch, folded)) {
          here.compute += folded;
        } else {
          NdSignature sig;
          nlohmann::json operands = nlohmann::json::array(), results = nlohmann::json::array();
          for (auto [v, attr] : llvm::zip(op.getOperands(), operandLayouts)) {
            sig.operands.push_back(cast<NdSbpAttr>(attr).toLayout());
            operands.push_back(layoutEntry(names, v, sig.operands.back()));
          }
          for (auto [v, attr] : llvm::zip(op.getResults(), resultLayouts)) {
            sig.results.push_back(cast<NdSbpAttr>(attr).toLayout());
            results.push_back(layoutEntry(names, v, sig.results.back()));
          }
          // A stored join's ops are not run (StoredJoin).
          double seconds =
              isStoredJoin(&op) ? 0 : computeSecondsOf(&op, sig, mesh, inputs.cluster, sizes);
          here.compute += seconds;
          nlohmann::json entry = {{"name", op.getNumResults() ? names(op.getResult(0)) : std::string()},
                                  {"op", op.getName().getStringRef().str()},
                                  {"location", describeLocation(op.getLoc())},
                                  {"operands", operands},
                                  {"results", results},
                                  {"est_time_s", seconds}};
          if (stage.size() > 1)
            entry["stage"] = stageOf(&op);
          if (auto runnerUp = op.getAttrOfType<DictionaryAttr>(kRunnerUp)) {
            auto layouts = [](Attribute attr) {
              std::vector<std::string> texts;
              for (Attribute layout : cast<ArrayAttr>(attr))
                texts.push_back(sbprt::toString(cast<NdSbpAttr>(layout).toLayout()));
              return texts;
            };
            entry["runner_up"] = {
                {"operands", layouts(runnerUp.get("operands"))},
                {"results", layouts(runnerUp.get("results"))},
                {"plan_time_s", cast<FloatAttr>(runnerUp.get("plan_seconds")).getValueAsDouble()}};
          }
          opList.add(std::move(entry), {"name", "runner_up"}, microBatch, print);
        }
      } else {
        continue;
      }
      // Results become live; values whose last use this is die after it
      // (the step's results are stored as soon as they are computed, so
      // returning one does not keep it).
      // On a pipeline, on the producer's stage and on each stage it is sent
      // to, until the last op there that reads it.
      // A stored join's ops make nothing a rank holds (StoredJoin).
      bool joins = isStoredJoin(&op);
      for (Value result : op.getResults()) {
        if (joins)
          break;
        std::optional<sbprt::NdSbp> layout = layoutOf(result);
        double bytes =
            layout ? static_cast<double>(localBytes(mesh, *layout, result, sizes.of(result))) : 0;
        std::vector<int64_t> holders = {stageOf(&op)};
        if (stage.size() > 1)
          for (int64_t to : stagesReading(result)) {
            holders.push_back(to);
            double seconds = collectiveSeconds(pipelineLink, 1, bytes);
            here.commBytes += bytes;
            here.comm += seconds;
            Operation *reader = nullptr;
            for (Operation *user : result.getUsers())
              if (!isa<func::ReturnOp>(user) && stageOf(user) == to &&
                  (!reader || user->isBeforeInBlock(reader)))
                reader = user;
            transfers.push_back({{"value", names(result)},
                                 {"shape", shapeOf(result)},
                                 {"sbp", layout ? sbprt::toString(*layout) : std::string("?")},
                                 {"from_stage", stageOf(&op)},
                                 {"to_stage", to},
                                 {"bytes_per_rank", bytes},
                                 {"est_time_s", seconds},
                                 {"location", describeLocation(op.getLoc())},
                                 {"reason", "'" + reader->getName().getStringRef().str() + "' at " +
                                                describeLocation(reader->getLoc()) +
                                                " on stage " + std::to_string(to) + " reads it"}});
          }
        hold(holders.front(), result, bytes, &op, stepOfOp.lookup(&op));
        for (int64_t holder : llvm::drop_begin(holders)) {
          Operation *first = nullptr;
          for (Operation *user : result.getUsers())
            if (!isa<func::ReturnOp>(user) && !isStoredJoin(user) && stageOf(user) == holder &&
                (!first || user->isBeforeInBlock(first)))
              first = user;
          if (first)
            arrivals[first].push_back({holder, result, bytes});
        }
      }
      for (StageTotals &totals : stage) {
        totals.activations.after(&op);
        totals.unfused.after(&op);
      }
    }
  }
  // The step's totals: times add up, bytes are the mean over the ranks,
  // memory is the fullest stage's. Under 1F1B or GPipe the stages overlap: each
  // micro-batch's work of a stage takes 1/M of the stage's, and the step
  // is the first micro-batch through every stage, then M - 1 more of the
  // slowest stage's.
  double compute = 0, comm = 0, commBytes = 0, peakMemory = 0, savedBytes = 0;
  size_t fullest = 0;
  // Where a stage's peak is, what it is made of, and the values that
  // weigh most in it.
  auto peakEntry = [&](const StageTotals &totals) {
    nlohmann::json entry = {{"arguments_bytes", totals.argBytes},
                            {"activations_bytes", totals.activations.peak}};
    Operation *at = totals.activations.peakOp;
    if (!at)
      return entry;
    entry["at"] = {{"op", at->getName().getStringRef().str()},
                   {"location", describeLocation(at->getLoc())},
                   {"micro_batch", microBatchOf(at)}};
    nlohmann::json largest = nlohmann::json::array();
    for (const Peak::Held &held : totals.activations.largestAtPeak(5)) {
      Operation *def = held.value.getDefiningOp();
      auto fn = def->getParentOfType<func::FuncOp>();
      largest.push_back({{"value", (*namesOf.find(fn)->second)(held.value)},
                         {"op", def->getName().getStringRef().str()},
                         {"shape", shapeOf(held.value)},
                         {"sbp", sbprt::toString(*layoutOf(held.value))},
                         {"location", describeLocation(def->getLoc())},
                         {"micro_batch", microBatchOf(def)},
                         {"bytes", held.bytes}});
    }
    entry["largest_live"] = std::move(largest);
    return entry;
  };
  double throughStages = 0, slowest = 0;
  nlohmann::json stageEntries = nlohmann::json::array();
  int64_t ranksPerStage = mesh.numDevices();
  for (auto [s, totals] : llvm::enumerate(stage)) {
    compute += totals.compute;
    comm += totals.comm;
    double perMicroBatch = (totals.compute + totals.comm) / static_cast<double>(microBatches);
    throughStages += perMicroBatch;
    slowest = std::max(slowest, perMicroBatch);
    commBytes += totals.commBytes / static_cast<double>(stage.size());
    double memory = totals.argBytes + totals.activations.peak;
    if (memory >= peakMemory) {
      peakMemory = memory;
      fullest = s;
      savedBytes = totals.unfused.peak - totals.activations.peak;
    }
    stageEntries.push_back({{"stage", s},
                            {"ranks",
                             {static_cast<int64_t>(s) * ranksPerStage,
                              (static_cast<int64_t>(s) + 1) * ranksPerStage - 1}},
                            {"compute_time_s", totals.compute},
                            {"comm_time_s", totals.comm},
                            {"comm_bytes_per_rank", totals.commBytes},
                            {"peak_memory_bytes", memory},
                            {"peak_memory", peakEntry(totals)},
                            {"blocks", totals.blocks}});
  }
  nlohmann::json fullestPeak = stageEntries[fullest]["peak_memory"];
  if (stage.size() > 1)
    fullestPeak["stage"] = fullest;
  nlohmann::json cluster = {{"name", inputs.cluster.name},
                            {"device_flops", inputs.cluster.flops},
                            {"device_bf16_flops", inputs.cluster.flopsIn(/*bf16=*/true)},
                            {"device_memory_bytes", inputs.cluster.memoryBytes}};
  nlohmann::json report = {
      {"version", 2},
      {"model", inputs.model},
      {"mesh", {{"spec", inputs.mesh}, {"axes", mesh.axes}, {"shape", mesh.shape}}},
      {"cluster", cluster},
      {"strategy", {{"name", inputs.strategy}, {"source", inputs.strategySource}}},
      {"search", search},
      {"totals",
       {{"comm_bytes_per_rank", commBytes},
        {"compute_time_s", compute},
        {"comm_time_s", comm},
        // Pipelined: a micro-batch through every stage, then the slowest
        // stage's share of each other; on V chunks a stage, a micro-batch
        // goes through a chunk of each stage, 1/V of it, before the next
        // chunk's work begins (the bubble V times smaller).
        {"estimated_step_time_s",
         stage.size() > 1 && schedule != "sequential"
             ? (throughStages + (static_cast<double>(microBatches * chunks) - 1) * slowest) /
                   static_cast<double>(chunks)
             : compute + comm},
        {"peak_memory_bytes", peakMemory},
        {"peak_memory", fullestPeak},
        {"fits_device_memory", peakMemory <= inputs.cluster.memoryBytes}}},
  };
  opList.finish();
  boxingList.finish();
  // Moved in, not copied: a step's lists run to hundreds of megabytes.
  report["ops"] = std::move(ops);
  report["boxings"] = std::move(boxings);
  if (fusedAttention)
    report["totals"]["flash_attention_saved_bytes"] = savedBytes;
  if (stage.size() > 1)
    report["pipeline"] = {{"axis", kPipelineAxis.str()},
                          {"stages", stage.size()},
                          {"schedule", schedule},
                          {"chunks", chunks},
                          {"micro_batches", microBatches},
                          {"per_stage", std::move(stageEntries)},
                          {"transfers", std::move(transfers)}};
  if (stage.size() > 1 && cutBy) {
    // The cut's own estimates.
    auto real = [&](StringRef name) {
      auto value = cutBy.getAs<FloatAttr>(name);
      return value ? value.getValueAsDouble() : 0.0;
    };
    std::vector<double> estimated;
    if (auto bytes = cutBy.getAs<DenseF64ArrayAttr>("bytes"))
      estimated.assign(bytes.asArrayRef().begin(), bytes.asArrayRef().end());
    auto by = cutBy.getAs<StringAttr>("by");
    nlohmann::json cut = {{"by", by ? by.str() : std::string("?")},
                          {"estimated_stage_bytes", estimated}};
    if (cutBy.get("memory_limit_bytes"))
      cut["memory_limit_bytes"] = real("memory_limit_bytes");
    if (cutBy.get("time_cut_fullest_bytes")) {
      cut["fastest_cut_fullest_bytes"] = real("time_cut_fullest_bytes");
      cut["fastest_cut_slowest_forward_s"] = real("time_cut_slowest_seconds");
      cut["slowest_forward_s"] = real("slowest_seconds");
    }
    report["pipeline"]["cut"] = std::move(cut);
  }
  if (!zero.is_null())
    report["zero"] = zero;
  return report;
}
