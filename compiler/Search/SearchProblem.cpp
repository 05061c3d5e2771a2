// Building the search problem from a seeded function; costing and applying
// solutions.
#include "compiler/Search/SearchProblem.h"

#include "compiler/Support/ArgAttrs.h"

#include "runtime/Tensor.h"

#include "llvm/ADT/bit.h"

#include <numeric>

using namespace mlir;

namespace sbpc::search {

std::string Node::name() const {
  return op ? op->getName().getStringRef().str() : std::string("argument");
}

int SearchProblem::layoutId(const sbprt::NdSbp &layout) {
  auto [it, inserted] =
      layoutIds_.try_emplace(sbprt::toString(layout), static_cast<int>(layouts_.size()));
  if (inserted)
    layouts_.push_back(layout);
  return it->second;
}

/// Interned layouts, 1-D projections and output bytes of every signature.
void SearchProblem::intern(Candidates &candidates, ArrayRef<Value> outputs) {
  size_t axes = mesh_->shape.size();
  for (const NdSignature &sig : candidates.sigs) {
    candidates.operandIds.emplace_back();
    for (const sbprt::NdSbp &layout : sig.operands)
      candidates.operandIds.back().push_back(layoutId(layout));
    candidates.resultIds.emplace_back();
    double bytes = 0;
    for (auto [layout, output] : llvm::zip(sig.results, outputs)) {
      candidates.resultIds.back().push_back(layoutId(layout));
      bytes += storedBytes(output, candidates.resultIds.back().back());
    }
    candidates.outputBytes.push_back(bytes);
    candidates.axisIds.emplace_back();
    candidates.replicated.emplace_back();
    for (size_t axis = 0; axis < axes; ++axis) {
      std::string key;
      bool replicated = true;
      for (const auto *side : {&sig.operands, &sig.results}) {
        for (const sbprt::NdSbp &layout : *side) {
          key += layout[axis].str() + ",";
          replicated &= layout[axis].isBroadcast();
        }
        key += "|";
      }
      candidates.axisIds.back().push_back(
          axisIds_.try_emplace(key, static_cast<int>(axisIds_.size())).first->second);
      candidates.replicated.back().push_back(replicated);
    }
  }
}

/// Ops with the same name, attributes and types have the same candidates;
/// a model's repeated layers compute them once.
const Candidates *SearchProblem::candidatesOf(Operation *op, std::string &error) {
  // What its signatures depend on (so that the layers of a model and the
  // micro-batches of a step share their candidates), and what its compute
  // times do: how much of each value is stored
  // (sbp::ElementSizes::storedShare), and in bf16 or f32.
  std::vector<const void *> key = sbp::signatureKey(op);
  auto share = [&](Value v) {
    return reinterpret_cast<const void *>(
        static_cast<uintptr_t>(llvm::bit_cast<uint64_t>(sizes_.storedShare(v))));
  };
  for (Value operand : op->getOperands())
    key.push_back(share(operand));
  for (Value result : op->getResults()) { // bf16 or f32 where it is stored, if it is
    key.push_back(reinterpret_cast<const void *>(sizes_.of(result)));
    key.push_back(share(result));
  }
  if (auto it = candidatesByKey_.find(key); it != candidatesByKey_.end())
    return it->second;
  auto candidates = std::make_unique<Candidates>();
  if (auto constraint = dyn_cast<sbp::ConstraintOp>(op)) {
    sbprt::NdSbp pinned = constraint.getLayout().toLayout();
    candidates->sigs.push_back({{pinned}, {pinned}});
    candidates->compute.push_back(0.0);
  } else {
    candidates->sigs = ndSignatures(op, *mesh_);
    if (candidates->sigs.empty()) {
      error = "has no SBP signature on this mesh";
      return nullptr;
    }
    for (const NdSignature &sig : candidates->sigs)
      candidates->compute.push_back(sbp::computeSecondsOf(op, sig, *mesh_, *cluster_, sizes_));
  }
  SmallVector<Value> results(op->getResults());
  intern(*candidates, results);
  const Candidates *result = candidates.get();
  ownedCandidates_.push_back(std::move(candidates));
  return candidatesByKey_[key] = result;
}

/// Whether two ops choose alike: the same signatures at the same costs (a
/// micro-batch's slice of the inputs differs from the others' only in
/// where it starts).
static bool sameChoices(const Candidates *a, const Candidates *b) {
  return a == b || (a && b && a->operandIds == b->operandIds && a->resultIds == b->resultIds &&
                    a->compute == b->compute && a->outputBytes == b->outputBytes);
}

/// The ops of a micro-batched step to lay out as the same op of micro-batch
/// 0 (copy -> original): the k-th op of micro-batch i (sbp::microBatchOps)
/// copies the k-th of micro-batch 0 where the copies choose alike and each
/// operand is either the same value in every copy or each copy's own result
/// of one tied op. Empty where the step is not micro-batched.
using Ties = llvm::DenseMap<Operation *, Operation *>;
static Ties microBatchTies(func::FuncOp fn, llvm::function_ref<const Candidates *(Operation *)> candidatesOf) {
  std::vector<std::vector<Operation *>> batches = sbp::microBatchOps(fn);
  if (batches.empty())
    return Ties();
  llvm::DenseMap<Operation *, std::pair<size_t, size_t>> position; // (micro-batch, k)
  for (auto [i, ops] : llvm::enumerate(batches))
    for (auto [k, op] : llvm::enumerate(ops))
      position[op] = {i, k};
  // Each copy's operand against the original's: the same value, or the
  // same result of the i-th and the 0-th op of one tied position.
  std::vector<char> tied(batches[0].size(), 0);
  auto readsAlike = [&](Value mine, Value theirs, size_t i) {
    if (mine == theirs)
      return true;
    auto own = dyn_cast<OpResult>(mine), original = dyn_cast<OpResult>(theirs);
    if (!own || !original || own.getResultNumber() != original.getResultNumber())
      return false;
    auto ownAt = position.find(own.getOwner()), originalAt = position.find(original.getOwner());
    return ownAt != position.end() && originalAt != position.end() &&
           ownAt->second.first == i && originalAt->second.first == 0 &&
           ownAt->second.second == originalAt->second.second && tied[ownAt->second.second];
  };
  Ties ties;
  for (auto [k, first] : llvm::enumerate(batches[0])) {
    const Candidates *candidates = candidatesOf(first);
    bool alike = candidates != nullptr;
    for (size_t i = 1; i < batches.size() && alike; ++i) {
      Operation *op = batches[i][k];
      alike = op->getName() == first->getName() &&
              op->getNumOperands() == first->getNumOperands() &&
              op->getNumResults() == first->getNumResults() &&
              sameChoices(candidatesOf(op), candidates);
      for (unsigned operand = 0; alike && operand < op->getNumOperands(); ++operand)
        alike = readsAlike(op->getOperand(operand), first->getOperand(operand), i);
    }
    tied[k] = alike;
    if (alike)
      for (size_t i = 1; i < batches.size(); ++i)
        ties[batches[i][k]] = first;
  }
  return ties;
}

FailureOr<SearchProblem> SearchProblem::build(func::FuncOp fn, const sbprt::Mesh &mesh,
                                              const Cluster &cluster, sbp::BoxingPlans &plans,
                                              bool tieMicroBatches) {
  SearchProblem problem;
  problem.fn_ = fn;
  problem.mesh_ = &mesh;
  problem.cluster_ = &cluster;
  problem.plans_ = &plans;
  problem.sizes_ = sbp::ElementSizes(fn);
  for (BlockArgument arg : fn.getArguments())
    if (std::optional<sbprt::NdSbp> layout = sbp::layoutOf(arg)) {
      std::string error = sbp::checkValueLayout(mesh, *layout, arg);
      if (!error.empty())
        return emitError(arg.getLoc()) << "argument #" << arg.getArgNumber() << " layout "
                                       << sbprt::toString(*layout) << ": " << error;
      problem.fixed_[arg] = problem.layoutId(*layout);
    }

  Ties ties;
  if (tieMicroBatches)
    ties = microBatchTies(fn, [&](Operation *op) {
      std::string error;
      return problem.candidatesOf(op, error);
    });

  // Op nodes in program order.
  llvm::DenseMap<Value, std::pair<int, int>> producer;
  llvm::DenseMap<Operation *, size_t> &nodeOf = problem.nodeOf_;
  for (Operation &op : fn.getBody().front()) {
    if (isa<func::ReturnOp>(op)) {
      // Results are stored as soon as they are computed (--sbp-spmdize):
      // one the step returns lives until its last other use.
      for (Value v : op.getOperands())
        if (!problem.lastUse_.count(v)) {
          Operation *def = v.getDefiningOp();
          problem.lastUse_[v] = def ? problem.stepOf_.lookup(def) : 0;
        }
      continue;
    }
    // Where in program order the op's operands are last read. A join of
    // micro-batch pieces does not keep them: each is stored as it is made
    // (StoredJoin; the search takes the pieces to be laid out as the
    // result, which the cheapest plan does).
    if (!sbp::storedJoinOf(&op, /*checkLayouts=*/false))
      for (Value operand : op.getOperands())
        problem.lastUse_[operand] = problem.steps_.size();
    problem.stepOf_[&op] = problem.steps_.size();
    if (Operation *original = ties.lookup(&op)) {
      // A later micro-batch's copy: its original's node stands for it.
      size_t n = nodeOf.lookup(original);
      Node &node = problem.nodes_[n];
      node.copies.push_back(&op);
      node.weight += 1;
      ++problem.tiedCopies_;
      nodeOf[&op] = n;
      problem.steps_.push_back({n, &op});
      for (auto [r, result] : llvm::enumerate(op.getResults()))
        producer[result] = {static_cast<int>(n), static_cast<int>(r)};
      continue;
    }
    std::string error;
    Node node;
    node.op = &op;
    node.candidates = node.base = problem.candidatesOf(&op, error);
    if (!node.candidates)
      return op.emitOpError() << error;
    node.inputs.assign(op.operand_begin(), op.operand_end());
    for (OpOperand &use : op.getOpOperands())
      node.inputElementBytes.push_back(problem.sizes_.ofUse(use));
    node.roundTrip.assign(op.getNumOperands(), 0);
    // The parameter and its states; the gradient is the step's own.
    if (std::optional<SmallVector<unsigned>> replaced = sbp::updateReplacedOperands(&op))
      for (unsigned k : *replaced)
        if (isa<BlockArgument>(op.getOperand(k)))
          node.roundTrip[k] = 1;
    node.outputs.assign(op.result_begin(), op.result_end());
    nodeOf[&op] = problem.nodes_.size();
    problem.steps_.push_back({problem.nodes_.size(), &op});
    for (auto [r, result] : llvm::enumerate(op.getResults()))
      producer[result] = {static_cast<int>(problem.nodes_.size()), static_cast<int>(r)};
    problem.nodes_.push_back(std::move(node));
  }
  // What every copy reads as it is (a parameter): --sbp-insert-boxing
  // changes its layout once for all of them.
  for (Node &node : problem.nodes_)
    if (!node.copies.empty())
      for (unsigned k = 0; k < node.op->getNumOperands(); ++k)
        node.sharedInput.push_back(llvm::all_of(node.copies,
                                                [&](Operation *copy) {
                                                  return copy->getOperand(k) ==
                                                         node.op->getOperand(k);
                                                })
                                       ? Node::kOnce
                                       : Node::kPerCopy);

  // A node per free argument: its candidates are what its consumers take,
  // and replication.
  for (BlockArgument arg : fn.getArguments()) {
    if (problem.fixed_.count(arg) || !problem.isUsed(arg))
      continue;
    auto candidates = std::make_unique<Candidates>();
    std::vector<int> ids{problem.layoutId(sbprt::NdSbp(mesh.shape.size(), sbprt::Sbp::broadcast()))};
    for (OpOperand &use : arg.getUses()) {
      auto at = nodeOf.find(use.getOwner());
      if (at == nodeOf.end())
        continue;
      for (const std::vector<int> &operandIds : problem.nodes_[at->second].candidates->operandIds)
        if (llvm::find(ids, operandIds[use.getOperandNumber()]) == ids.end())
          ids.push_back(operandIds[use.getOperandNumber()]);
    }
    for (int id : ids) {
      candidates->sigs.push_back({{}, {problem.layouts_[id]}});
      candidates->compute.push_back(0.0);
    }
    problem.intern(*candidates, {arg});
    Node node;
    node.argument = arg;
    node.candidates = node.base = candidates.get();
    node.outputs = {arg};
    producer[arg] = {static_cast<int>(problem.nodes_.size()), 0};
    problem.ownedCandidates_.push_back(std::move(candidates));
    problem.nodes_.push_back(std::move(node));
  }

  // Edges: where every input comes from, who reads every output.
  problem.sources_.resize(problem.nodes_.size());
  problem.uses_.resize(problem.nodes_.size());
  for (auto [n, node] : llvm::enumerate(problem.nodes_))
    problem.uses_[n].resize(node.outputs.size());
  for (auto [n, node] : llvm::enumerate(problem.nodes_)) {
    for (auto [k, input] : llvm::enumerate(node.inputs)) {
      Source source;
      if (auto it = producer.find(input); it != producer.end()) {
        source.node = it->second.first;
        source.output = it->second.second;
        problem.uses_[source.node][source.output].push_back(
            {static_cast<int>(n), static_cast<int>(k)});
      } else {
        source.fixed = problem.fixed_.lookup(input);
      }
      problem.sources_[n].push_back(source);
    }
  }
  problem.fixedView_ = problem.fixed_;
  problem.baseSources_ = problem.sources_;
  problem.baseUses_ = problem.uses_;
  for (const Node &node : problem.nodes_)
    problem.baseArity_.push_back({node.inputs.size(), node.outputs.size()});
  if (const graph::FusedAttention *attention = problem.sizes_.attention())
    for (const graph::FusedAttention::Core &core : attention->cores) {
      std::vector<std::pair<size_t, size_t>> &inputs = problem.coreInputs_.emplace_back();
      for (Operation *op : core.ops)
        for (size_t k = 0; k < op->getNumOperands(); ++k)
          inputs.push_back({nodeOf.lookup(op), k});
    }
  return problem;
}

int SearchProblem::zeroOf(int id, Value value) {
  auto [it, isNew] = zeroIds_.try_emplace({value.getType().getAsOpaquePointer(), id}, id);
  if (!isNew)
    return it->second;
  sbprt::NdSbp layout = layouts_[id];
  std::vector<size_t> axes;
  for (size_t axis : zeroAxes_)
    if (!layout[axis].isSplit()) {
      layout[axis] = sbprt::Sbp::broadcast();
      axes.push_back(axis);
    }
  if (!sbp::zeroSplit(*mesh_, layout, value, axes).empty())
    it->second = layoutId(layout);
  return it->second;
}

const Candidates *SearchProblem::updateView(const Node &node, size_t gradients,
                                            bool storesParameter) {
  std::unique_ptr<Candidates> &view = zeroViews_[{node.base, gradients, storesParameter}];
  if (view)
    return view.get();
  view = std::make_unique<Candidates>(*node.base);
  Candidates &c = *view;
  SmallVector<unsigned> states = *sbp::updateStateOperands(node.op);
  size_t inputs = node.op->getNumOperands(), outputs = node.op->getNumResults();
  for (size_t i = 0; i < c.sigs.size(); ++i) {
    std::vector<int> &operands = c.operandIds[i], &results = c.resultIds[i];
    // Parameter, states and results split as the parameter; from stage 2
    // the gradient too (at stage 1 it is reduced whole, then sliced).
    int split = zeroOf(operands[0], node.inputs[0]);
    if (split != operands[0]) {
      operands[0] = split;
      if (zeroStage_ >= 2)
        operands[1] = split;
      for (unsigned k : states)
        operands[k] = split;
      for (int &result : results)
        result = split;
      NdSignature sig = c.sigs[i];
      for (auto [layout, id] : llvm::zip(sig.operands, operands))
        layout = layouts_[id];
      for (auto [layout, id] : llvm::zip(sig.results, results))
        layout = layouts_[id];
      c.compute[i] = sbp::computeSecondsOf(node.op, sig, *mesh_, *cluster_, sizes_);
      c.outputBytes[i] = 0;
      for (size_t r = 0; r < outputs; ++r)
        c.outputBytes[i] += storedBytes(node.outputs[r], results[r]);
    }
    // Split on a data-parallel axis (by ZeRO, or by the plan): ZeRO splits
    // the adds that sum the micro-batches' gradients too.
    bool sharded = splitOnZeroAxes(split);
    std::vector<float> scale(inputs, 1.0f);
    if (gradients > 1) {
      operands.push_back(operands[1]);
      scale[1] = sharded ? 0.0f : 1.0f;
      scale.push_back(sharded ? static_cast<float>(gradients) : 0.0f);
    }
    if (storesParameter)
      results.push_back(operands[0]);
    c.inputScale.push_back(std::move(scale));
  }
  return view.get();
}

const Candidates *SearchProblem::storedView(const Node &node) {
  std::unique_ptr<Candidates> &view = zeroViews_[{node.base, 0, true}];
  if (view)
    return view.get();
  view = std::make_unique<Candidates>(*node.base);
  for (size_t i = 0; i < view->sigs.size(); ++i) {
    int &id = view->resultIds[i][0];
    id = zeroOf(id, node.outputs[0]);
    view->outputBytes[i] = storedBytes(node.outputs[0], id);
  }
  return view.get();
}

void SearchProblem::restoreBase() {
  sources_ = baseSources_;
  uses_ = baseUses_;
  for (auto [node, arity] : llvm::zip(nodes_, baseArity_)) {
    node.candidates = node.base;
    node.inputs.resize(arity.first);
    node.inputElementBytes.resize(arity.first);
    node.roundTrip.resize(arity.first);
    node.outputs.resize(arity.second);
  }
  for (Node &node : nodes_)
    for (char &shared : node.sharedInput)
      if (shared == Node::kOnceUnlessGathered)
        shared = Node::kOnce;
  fixedView_ = fixed_;
  gatheredPerUse_.clear();
  splitOnZeroAxes_.clear();
}

bool SearchProblem::splitOnZeroAxes(int id) {
  if (splitOnZeroAxes_.size() <= static_cast<size_t>(id))
    splitOnZeroAxes_.resize(layouts_.size(), -1);
  signed char &split = splitOnZeroAxes_[id];
  if (split < 0)
    split = llvm::any_of(zeroAxes_, [&](size_t axis) { return layouts_[id][axis].isSplit(); });
  return split;
}

void SearchProblem::setZero(int stage, std::vector<size_t> axes) {
  zeroStage_ = stage;
  zeroAxes_ = std::move(axes);
  zeroIds_.clear();
  zeroViews_.clear();
  restoreBase();
  if (stage <= 0 || zeroAxes_.empty())
    return;
  // What --sbp-zero stores split between steps: the states an update
  // alone reads, and at stage 3 the parameters. Where each input reads a
  // parameter stored so: (node, input) per parameter.
  llvm::DenseSet<Value> stored;
  llvm::DenseMap<Value, std::vector<std::pair<int, int>>> readers;
  for (auto [n, node] : llvm::enumerate(nodes_))
    for (auto [k, input] : llvm::enumerate(node.inputs))
      if (isa<BlockArgument>(input))
        readers[input].push_back({static_cast<int>(n), static_cast<int>(k)});
  for (auto [n, node] : llvm::enumerate(nodes_)) {
    std::optional<SmallVector<unsigned>> states =
        node.op ? sbp::updateStateOperands(node.op) : std::nullopt;
    if (!states)
      continue;
    for (unsigned k : *states)
      if (isa<BlockArgument>(node.inputs[k]) &&
          llvm::all_of(node.inputs[k].getUsers(), [&](Operation *user) { return user == node.op; }))
        stored.insert(node.inputs[k]);
    // From stage 2, the adds that accumulate the micro-batches' gradients,
    // each read by the next alone (sbp-zero's accumulateSplit): the view
    // reads the last micro-batch's gradient beside their sum.
    std::vector<Operation *> chain =
        stage >= 2 ? sbp::accumulatingAdds(node.op) : std::vector<Operation *>();
    if (!chain.empty()) {
      OpOperand &gradient = chain.front()->getOpOperand(1);
      Source source = sources_[nodeOf_.lookup(chain.front())][1];
      node.inputs.push_back(gradient.get());
      node.inputElementBytes.push_back(sizes_.ofUse(gradient));
      node.roundTrip.push_back(0);
      if (source.node >= 0)
        uses_[source.node][source.output].push_back(
            {static_cast<int>(n), static_cast<int>(node.inputs.size() - 1)});
      sources_[n].push_back(source);
    }
    // At stage 3 the parameter's other readers read what the update
    // defines, the parameter as stored.
    Value param = node.inputs[0];
    bool storesParameter = stage >= 3 && isa<BlockArgument>(param);
    if (storesParameter) {
      stored.insert(param);
      gatheredPerUse_.insert(param);
      int r = static_cast<int>(node.outputs.size());
      node.outputs.push_back(param);
      uses_[n].emplace_back();
      for (auto [m, k] : readers.lookup(param)) {
        if (m == static_cast<int>(n))
          continue;
        if (static_cast<size_t>(k) < nodes_[m].sharedInput.size() &&
            nodes_[m].sharedInput[k] == Node::kOnce)
          nodes_[m].sharedInput[k] = Node::kOnceUnlessGathered;
        Source &source = sources_[m][k];
        if (source.node >= 0)
          llvm::erase(uses_[source.node][source.output], std::make_pair(m, k));
        source = Source{static_cast<int>(n), r};
        uses_[n][r].push_back({m, k});
      }
    }
    node.candidates = updateView(node, chain.size() + 1, storesParameter);
  }
  for (Node &node : nodes_)
    if (!node.op && stored.contains(node.argument))
      node.candidates = storedView(node);
  for (auto &[value, id] : fixedView_)
    if (stored.contains(value))
      id = zeroOf(id, value);
  for (auto [n, node] : llvm::enumerate(nodes_))
    for (auto [k, input] : llvm::enumerate(node.inputs))
      if (sources_[n][k].node < 0)
        sources_[n][k].fixed = fixedView_.lookup(input);
}

std::vector<size_t> SearchProblem::dataParallelAxes(const std::vector<size_t> &choice) {
  llvm::DenseMap<Value, size_t> argumentNode;
  for (auto [n, node] : llvm::enumerate(nodes_))
    if (!node.op)
      argumentNode[node.argument] = n;
  return sbp::dataParallelAxes(fn_, *mesh_, [&](Value arg) -> std::optional<sbprt::NdSbp> {
    if (auto it = fixedView_.find(arg); it != fixedView_.end())
      return layouts_[it->second];
    if (auto it = argumentNode.find(arg); it != argumentNode.end())
      return layouts_[nodes_[it->second].outputLayout(choice[it->second], 0)];
    return std::nullopt;
  });
}

int SearchProblem::typeId(Type type, size_t elementBytes) {
  return typeIds_
      .try_emplace({type.getAsOpaquePointer(), elementBytes}, static_cast<int>(typeIds_.size()))
      .first->second;
}

double SearchProblem::changeSeconds(size_t n, size_t k, int from, int to) {
  if (from == to)
    return 0.0;
  Value value = nodes_[n].inputs[k];
  size_t elementBytes = nodes_[n].inputElementBytes[k];
  bool roundTrip = nodes_[n].roundTrip[k];
  uint64_t key = (static_cast<uint64_t>(roundTrip) << 63) |
                 (static_cast<uint64_t>(typeId(value.getType(), elementBytes)) << 42) |
                 (static_cast<uint64_t>(from) << 21) | static_cast<uint64_t>(to);
  auto [it, inserted] = boxing_.try_emplace(key, 0.0);
  if (inserted) {
    it->second = plans_->get(value, layouts_[from], layouts_[to], elementBytes).seconds;
    if (roundTrip)
      it->second += plans_->get(value, layouts_[to], layouts_[from], elementBytes).seconds;
  }
  return it->second;
}

double SearchProblem::inputSeconds(size_t n, size_t k, size_t c, int from) {
  const Node &node = nodes_[n];
  // Once for all copies where they read the same value, unless ZeRO-3
  // gathers it for each use (from where it stores it split).
  char shared = k < node.sharedInput.size() ? node.sharedInput[k] : Node::kPerCopy;
  bool once =
      shared == Node::kOnce || (shared == Node::kOnceUnlessGathered && !splitOnZeroAxes(from));
  double scale = (once ? 1.0 : node.weight) * node.inputScale(c, k);
  return scale == 0 ? 0.0 : scale * changeSeconds(n, k, from, node.inputLayout(c, k));
}

double SearchProblem::localBytes(Value value, int id) {
  size_t elementBytes = sizes_.of(value);
  uint64_t key = (static_cast<uint64_t>(typeId(value.getType(), elementBytes)) << 32) |
                 static_cast<uint64_t>(id);
  auto [it, inserted] = bytes_.try_emplace(key, 0.0);
  if (inserted)
    it->second = static_cast<double>(elementBytes) *
                 sbprt::numElements(localShape(*mesh_, layouts_[id], sbp::shapeOf(value)));
  return it->second;
}

double SearchProblem::storedBytes(Value value, int id) {
  return localBytes(value, id) * sizes_.storedShare(value);
}

/// The layout input k of node n gets from its source under `choice`.
static int sourceLayout(SearchProblem &problem, const std::vector<size_t> &choice, size_t n,
                        size_t k) {
  const Source &source = problem.source(n, k);
  if (source.node < 0)
    return source.fixed;
  return problem.nodes()[source.node].outputLayout(choice[source.node], source.output);
}

double evaluate(SearchProblem &problem, const std::vector<size_t> &choice) {
  double seconds = 0;
  for (auto [n, node] : llvm::enumerate(problem.nodes())) {
    seconds += node.compute(choice[n]);
    for (size_t k = 0; k < node.inputs.size(); ++k)
      seconds += problem.inputSeconds(n, k, choice[n], sourceLayout(problem, choice, n, k));
  }
  return seconds;
}

double localCost(SearchProblem &problem, const std::vector<size_t> &choice, size_t n, size_t c) {
  const Node &node = problem.nodes()[n];
  double seconds = problem.nodeCost(n, c);
  for (size_t k = 0; k < node.inputs.size(); ++k)
    seconds += problem.inputSeconds(n, k, c, sourceLayout(problem, choice, n, k));
  for (size_t r = 0; r < node.outputs.size(); ++r)
    for (auto [m, k] : problem.uses(n, r))
      seconds += problem.inputSeconds(m, k, choice[m], node.outputLayout(c, r));
  return seconds;
}

/// What each rank keeps, for planMemory, of the gradients ZeRO reduces
/// into slices (stage 2 and up): the one an update reads and, over
/// micro-batches, what each accumulating add adds. The backward makes each
/// whole or partial, and it is reduce-scattered as it is made, so it
/// counts its slice on the axes ZeRO split the update on. (The parameters,
/// states and running sums ZeRO splits are split in the problem's view
/// already: SearchProblem::setZero.)
static llvm::DenseMap<Value, double> zeroGradientShares(SearchProblem &problem,
                                                        const std::vector<size_t> &choice) {
  llvm::DenseMap<Value, double> shares;
  if (problem.zeroStage() < 2)
    return shares;
  const sbprt::Mesh &mesh = problem.mesh();
  for (auto [n, node] : llvm::enumerate(problem.nodes())) {
    if (!node.op || !sbp::updateStateOperands(node.op))
      continue;
    const sbprt::NdSbp &split = problem.layout(node.inputLayout(choice[n], 0));
    std::vector<size_t> axes;
    for (size_t axis : problem.zeroAxes())
      if (split[axis].isSplit())
        axes.push_back(axis);
    auto shareOf = [&](int id) {
      double share = 1;
      for (size_t axis : axes)
        if (!problem.layout(id)[axis].isSplit())
          share /= static_cast<double>(mesh.shape[axis]);
      return share;
    };
    if (double share = shareOf(sourceLayout(problem, choice, n, 1)); share < 1)
      shares[node.inputs[1]] = share;
    for (Operation *add : sbp::accumulatingAdds(node.op))
      for (size_t k = 0; k < 2; ++k) // a tied copy's operands are laid out as its node's
        if (double share = shareOf(sourceLayout(problem, choice, problem.nodeOf(add), k));
            share < 1)
          shares[add->getOperand(k)] = share;
  }
  return shares;
}

/// Whether `value` is a parameter's gradient (or a micro-batch's part of
/// one): an update, a sum over micro-batches or the step's result reads
/// it. Such values are spread over the stages with their parameters.
static bool isParameterGradient(Value value) {
  return llvm::any_of(value.getUsers(), [](Operation *user) {
    return isa<func::ReturnOp>(user) || user->hasAttr(graph::GraphDialect::kAccumulateAttr) ||
           sbp::updateStateOperands(user).has_value();
  });
}

const std::vector<int> &SearchProblem::pipelineBlocks() {
  if (pipelineBlocks_)
    return *pipelineBlocks_;
  std::vector<int> &blockOf = pipelineBlocks_.emplace(steps_.size(), -1);
  llvm::DenseSet<Operation *> backward;
  std::vector<Operation *> ops =
      sbp::pipelineCutOps(fn_, /*layoutsKnown=*/false, backward).perMicroBatch.front();
  for (auto [block, unit] : llvm::enumerate(sbp::pipelineCutUnits(ops))) {
    for (size_t i = unit.first; i < unit.second; ++i)
      blockOf[stepOf(ops[i])] = static_cast<int>(block);
    auto region = ops[unit.first]->getAttrOfType<StringAttr>(graph::GraphDialect::kRegionAttr);
    pipelineBlockNames_.push_back(region ? region.str() : "");
  }
  return blockOf;
}

double planMemory(SearchProblem &problem, const std::vector<size_t> &choice,
                  const PipelineShare &pipeline, double *stretch) {
  if (stretch)
    *stretch = 1;
  const int64_t stages = pipeline.cut.stages;
  double inFlight = 1; // the most any stage holds
  if (stages > 1)
    for (double held : pipeline.inFlight)
      inFlight = std::max(inFlight, held);
  llvm::DenseMap<Value, double> zero = zeroGradientShares(problem, choice);
  auto zeroShare = [&](Value v) {
    auto it = zero.find(v);
    return it == zero.end() ? 1.0 : it->second;
  };
  // Flash attention's cores that fuse: no input of their ops changes layout.
  std::vector<char> fusing;
  for (const auto &inputs : problem.coreInputs())
    fusing.push_back(llvm::all_of(inputs, [&](std::pair<size_t, size_t> input) {
      auto [n, k] = input;
      return sourceLayout(problem, choice, n, k) ==
             problem.nodes()[n].inputLayout(choice[n], k);
    }));
  auto fuses = [&](unsigned core) { return static_cast<bool>(fusing[core]); };
  const graph::FusedAttention *attention = problem.sizes().attention();
  double arguments = 0;
  llvm::DenseMap<Value, double> argumentBytes;
  for (BlockArgument arg : problem.function().getArguments())
    if (std::optional<int> fixed = problem.fixedLayoutId(arg))
      arguments += argumentBytes[arg] = problem.localBytes(arg, *fixed);
  for (auto [n, node] : llvm::enumerate(problem.nodes()))
    if (!node.op)
      arguments += argumentBytes[node.argument] =
          problem.localBytes(node.argument, node.outputLayout(choice[n], 0));
  // Op by op in program order, a tied micro-batch copy laid out as its
  // node: what each defines, live until its last use.
  const std::vector<std::pair<size_t, Operation *>> &steps = problem.steps();
  double live = 0, peak = 0;
  // Micro-batch 0's stash: what its forward made that its backward, from
  // its first op on, still reads.
  auto firstOfBatch = [](Operation *op) {
    auto mark = op->getAttrOfType<IntegerAttr>(sbp::kMicroBatch);
    return !mark || mark.getInt() == 0;
  };
  size_t backwardFrom = steps.size();
  if (stages > 1)
    for (auto [s, step] : llvm::enumerate(steps))
      if (step.second->hasAttr(graph::GraphDialect::kBackwardAttr) && firstOfBatch(step.second)) {
        backwardFrom = s;
        break;
      }
  double stash = 0;
  // On a pipeline, the whole blocks --sbp-pipeline cuts: each step of
  // micro-batch 0's forward in one (-1: none), with the arguments its
  // steps read first and the stash their stage keeps.
  static const std::vector<int> noBlocks;
  const std::vector<int> &blockOf = stages > 1 ? problem.pipelineBlocks() : noBlocks;
  int64_t blocks = blockOf.empty() ? 0 : *std::max_element(blockOf.begin(), blockOf.end()) + 1;
  std::vector<double> blockArguments(blocks, 0.0), blockStash(blocks, 0.0);
  // A stash is kept where the forward reads it: on the blocks of its
  // readers at `readers` (each that reads it; a block's input, received
  // from the stage before), else on its maker's at `made`.
  auto stashOf = [&](size_t made, ArrayRef<size_t> readers, double bytes) {
    stash += bytes;
    if (!blocks)
      return;
    std::set<int> where;
    for (size_t reader : readers)
      if (blockOf[reader] >= 0 && blockOf[reader] != blockOf[made])
        where.insert(blockOf[reader]);
    if (where.empty() && blockOf[made] >= 0)
      where.insert(blockOf[made]);
    for (int block : where)
      blockStash[block] += bytes;
  };
  auto readersOf = [&](Value value) {
    SmallVector<size_t> readers;
    for (Operation *user : value.getUsers())
      if (!isa<func::ReturnOp>(user))
        readers.push_back(problem.stepOf(user));
    return readers;
  };
  if (blocks) {
    llvm::DenseSet<Value> counted;
    for (auto [s, step] : llvm::enumerate(steps))
      if (blockOf[s] >= 0)
        for (Value operand : step.second->getOperands())
          if (isa<BlockArgument>(operand) && counted.insert(operand).second)
            blockArguments[blockOf[s]] += argumentBytes.lookup(operand);
  }
  // A join of micro-batch pieces goes where the plan lays each piece out
  // as the result (sbp::StoredJoin); where it does not, the join runs and
  // holds every piece until it reads them.
  llvm::DenseSet<Operation *> unstoredJoinOps;
  llvm::DenseMap<Value, size_t> joinedAt;
  for (auto [s, step] : llvm::enumerate(steps)) {
    auto concat = dyn_cast<graph::ConcatOp>(step.second);
    std::optional<sbp::StoredJoin> join =
        concat ? sbp::storedJoinOf(concat, /*checkLayouts=*/false) : std::nullopt;
    if (!join)
      continue;
    Operation *root = join->result.getDefiningOp();
    int laidOut =
        problem.nodes()[problem.nodeOf(root)].outputLayout(choice[problem.nodeOf(root)], 0);
    bool stored = llvm::all_of(concat.getInputs(), [&](Value grouped) {
      return sourceLayout(problem, choice, problem.nodeOf(grouped.getDefiningOp()), 0) == laidOut;
    });
    if (stored)
      continue;
    unstoredJoinOps.insert(root);
    unstoredJoinOps.insert(concat);
    for (auto [grouped, piece] : llvm::zip(concat.getInputs(), join->pieces)) {
      unstoredJoinOps.insert(grouped.getDefiningOp());
      joinedAt[piece] = s;
    }
  }
  // What the backward made (recomputed activations too) and the copies it
  // made to read (a parameter ZeRO-3 gathers for a recomputed forward and
  // the gradients' products), live at the peak: one block's work, which a
  // stage has as much of as the whole.
  double liveBackward = 0, backwardAtPeak = 0;
  std::vector<double> freedAfter(steps.size() + 1, 0.0), backwardFreedAfter(steps.size() + 1, 0.0);
  // What ops read in another layout than the producer gave: one reshard
  // per value and layout (--sbp-insert-boxing shares it between the uses
  // that want it), live from the first of those uses to the last; one per
  // use of a parameter ZeRO-3 gathers before each use, live at that use.
  std::vector<double> reshardedAt(steps.size() + 1, 0.0),
      backwardReshardedAt(steps.size() + 1, 0.0);
  std::map<std::tuple<const void *, int, size_t>, std::pair<size_t, size_t>> reshards;
  for (auto [s, step] : llvm::enumerate(steps)) {
    auto [n, op] = step;
    if (isa<sbp::ConstraintOp>(op))
      continue;
    const Node &node = problem.nodes()[n];
    // (An update's view reads a micro-batch's gradient besides: ZeRO
    // reduce-scatters each as it is made, its slice counted with it.)
    for (size_t k = 0; k < op->getNumOperands(); ++k) {
      int want = node.inputLayout(choice[n], k), have = sourceLayout(problem, choice, n, k);
      // The new parameter or state an update makes goes back to the
      // layout its argument is stored in as soon as it is made (and is
      // stored): that copy lives beside the update's results.
      if (node.roundTrip[k] && have != want) {
        double bytes = problem.localBytes(op->getOperand(k), have);
        reshardedAt[s] += bytes;
        freedAfter[s] += bytes;
      }
      // (An input ZeRO's view leaves unpaid arrives as it is wanted.)
      if (have == want || node.inputScale(choice[n], k) == 0)
        continue;
      Value value = op->getOperand(k);
      auto [it, isNew] = reshards.try_emplace(
          {value.getAsOpaquePointer(), want, problem.gatheredAtEachUse(value, have) ? s : 0}, s,
          s);
      it->second.second = s;
    }
  }
  for (auto &[key, span] : reshards) {
    Value value = Value::getFromOpaquePointer(std::get<0>(key));
    double bytes = problem.localBytes(value, std::get<1>(key));
    reshardedAt[span.first] += bytes;
    freedAfter[span.second] += bytes;
    // A copy the backward makes is of its working set.
    if (steps[span.first].second->hasAttr(graph::GraphDialect::kBackwardAttr)) {
      backwardReshardedAt[span.first] += bytes;
      backwardFreedAfter[span.second] += bytes;
    }
    // A copy of a value of micro-batch 0 that its forward makes and its
    // backward reads too (a layer's input gathered for the forward and its
    // recomputation) is stashed with what the forward made. (A copy of a
    // parameter all micro-batches read lives through the step once.)
    Operation *def = value.getDefiningOp();
    auto mark = def ? def->getAttrOfType<IntegerAttr>(sbp::kMicroBatch) : IntegerAttr();
    if (span.first < backwardFrom && span.second >= backwardFrom && mark && mark.getInt() == 0)
      stashOf(problem.stepOf(def), {span.first}, bytes);
  }
  for (auto [s, step] : llvm::enumerate(steps)) {
    auto [n, op] = step;
    if (isa<sbp::ConstraintOp>(op))
      continue;
    live += reshardedAt[s];
    liveBackward += backwardReshardedAt[s];
    bool joins =
        sbp::storedJoinOf(op, /*checkLayouts=*/false).has_value() && !unstoredJoinOps.contains(op);
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      if (joins)
        break; // makes nothing a rank holds
      double bytes = problem.localBytes(result, problem.nodes()[n].outputLayout(choice[n], r)) *
                     problem.sizes().storedShare(result, fuses) * zeroShare(result);
      live += bytes;
      size_t last = problem.isUsed(result) ? problem.lastUse(result) : s;
      // A fused backward reads its forward's output and log-sum-exp again.
      if (Operation *until = attention ? attention->livesUntil(result, fuses) : nullptr)
        last = std::max(last, problem.stepOf(until));
      if (auto until = joinedAt.find(result); until != joinedAt.end())
        last = std::max(last, until->second);
      freedAfter[last] += bytes;
      if (s < backwardFrom && last >= backwardFrom && firstOfBatch(op))
        stashOf(s, readersOf(result), bytes);
      if (op->hasAttr(graph::GraphDialect::kBackwardAttr) && !isParameterGradient(result)) {
        liveBackward += bytes;
        backwardFreedAfter[last] += bytes;
      }
    }
    if (live > peak) {
      peak = live;
      backwardAtPeak = liveBackward;
    }
    live -= freedAfter[s];
    liveBackward -= backwardFreedAfter[s];
  }
  if (stages <= 1)
    return arguments + peak;
  // What the stages share but the backward's working set: the parameters,
  // states and the rest of the peak.
  double shared = arguments + peak - backwardAtPeak;
  if (blocks >= pipeline.cut.parts()) {
    // Whole blocks, each its forward's compute and, of what no block's
    // steps read first (optimizer states, gradient sums, the rest of the
    // peak), a share in proportion to the arguments it reads first; of a
    // stash made outside the blocks, in proportion to its own.
    auto spread = [&](const std::vector<double> &parts, double whole) {
      double sum = std::accumulate(parts.begin(), parts.end(), 0.0);
      std::vector<double> spread;
      for (double part : parts)
        spread.push_back(part +
                         std::max(whole - sum, 0.0) * (sum > 0 ? part / sum : 1.0 / parts.size()));
      return spread;
    };
    std::vector<double> held = spread(blockArguments, shared - stash),
                        stashed = spread(blockStash, stash), seconds(blocks, 0.0);
    for (auto [s, step] : llvm::enumerate(steps))
      if (blockOf[s] >= 0)
        seconds[blockOf[s]] += problem.nodes()[step.first].candidates->compute[choice[step.first]];
    std::vector<sbp::CutMemory> memory;
    for (int64_t b = 0; b < blocks; ++b)
      memory.push_back({held[b], stashed[b], backwardAtPeak});
    // By hand where the starts make a whole cut (--sbp-search refuses
    // starts that make none), by the pass otherwise.
    if (!pipeline.starts.empty()) {
      size_t matched = 0;
      std::vector<int64_t> byHand =
          sbp::handCutChunks(problem.pipelineBlockNames(), pipeline.starts, matched);
      if (matched == pipeline.starts.size() &&
          static_cast<int64_t>(matched) + 1 == pipeline.cut.parts())
        return sbp::cutAt(pipeline.cut, seconds, memory, std::move(byHand))
            .fullestBytes(pipeline.cut);
    }
    sbp::PipelineCut cut = sbp::cutPipeline(pipeline.cut, seconds, memory);
    if (stretch && cut.timeCut && cut.timeCut->second > 0)
      *stretch = cut.slowestSeconds() / cut.timeCut->second;
    return cut.fullestBytes(pipeline.cut);
  }
  // Fewer blocks than chunks: shares. The fullest stage of a cut by time
  // holds 1/N of the parameters, states and the rest, its share of
  // micro-batch 0's stash once for each micro-batch it holds, and the
  // backward's working set whole.
  double n = static_cast<double>(stages);
  double byTime = (shared + (inFlight - 1) * stash) / n + backwardAtPeak;
  if (pipeline.cut.memoryLimit <= 0 || byTime <= pipeline.cut.memoryLimit)
    return byTime;
  // Cut for memory, chunks of a stage apart: stage s takes the share x_s
  // of the model at which x_s * (shared + (held_s - 1) * stash) is the
  // same on every stage.
  double inverse = 0, largestShare = 0;
  for (int64_t s = 0; s < stages; ++s) {
    double held = s < static_cast<int64_t>(pipeline.inFlight.size())
                      ? std::max(pipeline.inFlight[s], 1.0)
                      : 1.0;
    inverse += 1 / (shared + (held - 1) * stash);
    largestShare = std::max(largestShare, 1 / (shared + (held - 1) * stash));
  }
  // (The stage of the largest share takes that much of the compute, where
  // time would give each 1/N.)
  if (stretch)
    *stretch = n * largestShare / inverse;
  return 1 / inverse + backwardAtPeak;
}

std::optional<std::pair<size_t, double>> runnerUp(SearchProblem &problem,
                                                  const Solution &solution, size_t n) {
  const Node &node = problem.nodes()[n];
  if (node.numChoices() < 2)
    return std::nullopt;
  double current = localCost(problem, solution.choice, n, solution.choice[n]);
  std::optional<std::pair<size_t, double>> best;
  for (size_t c = 0; c < node.numChoices(); ++c) {
    if (c == solution.choice[n])
      continue;
    double seconds = solution.seconds - current + localCost(problem, solution.choice, n, c);
    if (!best || seconds < best->second)
      best = {c, seconds};
  }
  return best;
}

void applySolution(SearchProblem &problem, const Solution &solution, sbp::MeshOp mesh) {
  func::FuncOp fn = problem.function();
  MLIRContext *ctx = fn.getContext();
  ArgAttrEdits argAttrs(fn);
  for (auto [node, choice] : llvm::zip(problem.nodes(), solution.choice)) {
    const NdSignature &sig = node.choice(choice);
    if (!node.op)
      argAttrs.set(cast<BlockArgument>(node.argument).getArgNumber(), sbp::kArgLayout,
                   sbp::NdSbpAttr::get(ctx, sig.results[0]));
    else if (!isa<sbp::ConstraintOp>(node.op)) {
      ArrayAttr operands = sbp::layoutsAttr(ctx, sig.operands);
      ArrayAttr results = sbp::layoutsAttr(ctx, sig.results);
      for (Operation *op : llvm::concat<Operation *const>(ArrayRef(node.op), node.copies))
        sbp::setSignature(op, operands, results);
    }
  }
  sbprt::NdSbp broadcast(mesh.getRank(), sbprt::Sbp::broadcast());
  for (BlockArgument arg : fn.getArguments())
    if (!argAttrs.get(arg.getArgNumber(), sbp::kArgLayout))
      argAttrs.set(arg.getArgNumber(), sbp::kArgLayout, sbp::NdSbpAttr::get(ctx, broadcast));
  argAttrs.apply();
  fn->setAttr(sbp::kFuncMesh, FlatSymbolRefAttr::get(mesh.getSymNameAttr()));
}

} // namespace sbpc::search
