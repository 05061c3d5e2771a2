// Layouts of values in laid-out IR.
#include "compiler/Sbp/ValueLayouts.h"

#include "compiler/Support/Diagnostics.h"
#include "dialects/Graph/IR/GraphOps.h"

#include "runtime/Tensor.h"


using namespace mlir;

namespace sbpc::sbp {

FailureOr<MeshOp> findMesh(ModuleOp module) {
  auto meshes = llvm::to_vector(module.getOps<MeshOp>());
  if (meshes.size() != 1)
    return module.emitError() << "expected exactly one sbp.mesh in the module, found "
                              << meshes.size();
  return meshes.front();
}

std::optional<sbprt::NdSbp> layoutOf(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!fn)
      return std::nullopt;
    if (auto layout = fn.getArgAttrOfType<NdSbpAttr>(arg.getArgNumber(), kArgLayout))
      return layout.toLayout();
    return std::nullopt;
  }
  Operation *producer = value.getDefiningOp();
  if (auto boxing = dyn_cast<BoxingOp>(producer))
    return boxing.getTo().toLayout();
  if (auto constraint = dyn_cast<ConstraintOp>(producer))
    return constraint.getLayout().toLayout();
  auto results = producer->getAttrOfType<ArrayAttr>(kResultLayouts);
  unsigned index = cast<OpResult>(value).getResultNumber();
  if (!results || index >= results.size())
    return std::nullopt;
  if (auto layout = dyn_cast<NdSbpAttr>(results[index]))
    return layout.toLayout();
  return std::nullopt;
}

ArrayAttr layoutsAttr(MLIRContext *ctx, ArrayRef<sbprt::NdSbp> layouts) {
  SmallVector<Attribute> attrs;
  for (const sbprt::NdSbp &layout : layouts)
    attrs.push_back(NdSbpAttr::get(ctx, layout));
  return ArrayAttr::get(ctx, attrs);
}

std::optional<StoredJoin> storedJoinOf(Operation *op, bool checkLayouts) {
  if (!op || !op->hasAttr(kOutputJoin))
    return std::nullopt;
  // Forward to the reshape that makes the result: each join op's only
  // reader is the next.
  Operation *root = op;
  while (root->getNumResults() == 1 && root->getResult(0).hasOneUse() &&
         (*root->getUsers().begin())->hasAttr(kOutputJoin))
    root = *root->getUsers().begin();
  auto reshape = dyn_cast<graph::ReshapeOp>(root);
  auto concat = reshape ? reshape.getInput().getDefiningOp<graph::ConcatOp>() : nullptr;
  if (!concat || !concat->hasAttr(kOutputJoin) || !concat.getResult().hasOneUse() ||
      !reshape.getResult().hasOneUse() || !isa<func::ReturnOp>(*reshape->getUsers().begin()))
    return std::nullopt;
  StoredJoin join{reshape.getResult(), {}};
  std::optional<sbprt::NdSbp> layout = checkLayouts ? layoutOf(join.result) : std::nullopt;
  if (checkLayouts && !layout)
    return std::nullopt;
  auto resultType = cast<RankedTensorType>(join.result.getType());
  int64_t count = static_cast<int64_t>(concat.getInputs().size());
  for (Value grouped : concat.getInputs()) {
    auto group = grouped.getDefiningOp<graph::ReshapeOp>();
    if (!group || !group->hasAttr(kOutputJoin) || !grouped.hasOneUse())
      return std::nullopt;
    Value piece = group.getInput();
    auto type = cast<RankedTensorType>(piece.getType());
    if (type.getRank() != resultType.getRank() || type.getRank() == 0 ||
        type.getDimSize(0) * count != resultType.getDimSize(0) ||
        type.getShape().drop_front() != resultType.getShape().drop_front())
      return std::nullopt;
    if (checkLayouts && layoutOf(piece) != layout)
      return std::nullopt;
    // One stage stores the output (a pipeline's stages cut each
    // micro-batch alike, so its pieces are on one stage).
    if (!join.pieces.empty() &&
        stageOf(piece.getDefiningOp()) != stageOf(join.pieces.front().getDefiningOp()))
      return std::nullopt;
    join.pieces.push_back(piece);
  }
  return join;
}

int64_t stageOf(Operation *op) {
  auto attr = op ? op->getAttrOfType<IntegerAttr>(kStage) : nullptr;
  return attr ? attr.getInt() : 0;
}

std::vector<int64_t> stagesReading(Value value) {
  int64_t from = stageOf(value.getDefiningOp());
  std::vector<int64_t> stages;
  for (Operation *user : value.getUsers())
    if (!isa<func::ReturnOp>(user) && !isStoredJoin(user) && stageOf(user) != from)
      stages.push_back(stageOf(user));
  llvm::sort(stages);
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return stages;
}

bool stageLoads(BlockArgument arg, int64_t stage) {
  // One that nothing reads is still the program's: the first stage's.
  if (arg.use_empty())
    return stage == 0;
  return llvm::any_of(arg.getUsers(), [&](Operation *user) {
    return isa<func::ReturnOp>(user) ? stage == 0 : stageOf(user) == stage;
  });
}

std::vector<std::vector<Operation *>> microBatchOps(func::FuncOp fn) {
  std::vector<std::vector<Operation *>> batches;
  for (Operation &op : fn.getBody().front()) {
    auto mark = op.getAttrOfType<IntegerAttr>(kMicroBatch);
    if (!mark || op.hasAttr(graph::GraphDialect::kAccumulateAttr))
      continue;
    if (mark.getInt() < 0)
      return {};
    size_t i = static_cast<size_t>(mark.getInt());
    if (batches.size() <= i)
      batches.resize(i + 1);
    batches[i].push_back(&op);
  }
  if (batches.size() < 2 ||
      llvm::any_of(batches, [&](const auto &ops) { return ops.size() != batches[0].size(); }))
    return {};
  return batches;
}

bool isForwardOp(Operation *op, const llvm::DenseSet<Operation *> &backward) {
  return !backward.contains(op) && !isa<BoxingOp, ConstraintOp, func::ReturnOp>(op) &&
         !op->hasAttr(graph::GraphDialect::kAccumulateAttr);
}

PipelineCutOps pipelineCutOps(func::FuncOp fn, bool layoutsKnown,
                              llvm::DenseSet<Operation *> &backward) {
  Block &body = fn.getBody().front();
  for (Operation &op : body.without_terminator())
    if (op.hasAttr(graph::GraphDialect::kBackwardAttr) ||
        llvm::any_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && backward.contains(def);
        }))
      backward.insert(&op);
  auto isForward = [&](Operation *op) { return isForwardOp(op, backward); };
  PipelineCutOps cut;
  llvm::DenseSet<Operation *> &fromArguments = cut.fromArguments;
  for (Operation &op : body.without_terminator())
    if (isForward(&op) && llvm::all_of(op.getOperands(), [&](Value v) {
          if (auto arg = dyn_cast<BlockArgument>(v))
            return !!fn.getArgAttr(arg.getArgNumber(), graph::GraphDialect::kInputAttr);
          return fromArguments.contains(v.getDefiningOp());
        }))
      fromArguments.insert(&op);
  auto isCut = [&](Operation *op) {
    if (!isForward(op) || fromArguments.contains(op))
      return false;
    return layoutsKnown ? !isStoredJoin(op) : !storedJoinOf(op, /*checkLayouts=*/false);
  };
  cut.perMicroBatch = microBatchOps(fn);
  if (cut.perMicroBatch.empty()) {
    cut.perMicroBatch.emplace_back();
    for (Operation &op : body.without_terminator())
      cut.perMicroBatch.back().push_back(&op);
  }
  for (std::vector<Operation *> &ops : cut.perMicroBatch)
    llvm::erase_if(ops, [&](Operation *op) { return !isCut(op); });
  return cut;
}

std::vector<std::pair<size_t, size_t>> pipelineCutUnits(ArrayRef<Operation *> ops) {
  std::vector<std::pair<size_t, size_t>> units;
  StringAttr previous;
  for (auto [i, op] : llvm::enumerate(ops)) {
    auto region = op->getAttrOfType<StringAttr>(graph::GraphDialect::kRegionAttr);
    if (i > 0 && region && region == previous)
      units.back().second = i + 1;
    else
      units.push_back({i, i + 1});
    previous = region;
  }
  return units;
}

std::vector<size_t>
dataParallelAxes(func::FuncOp fn, const sbprt::Mesh &mesh,
                 llvm::function_ref<std::optional<sbprt::NdSbp>(Value)> layoutOf) {
  std::vector<size_t> axes;
  for (size_t axis = 0; axis < mesh.shape.size(); ++axis)
    for (BlockArgument arg : fn.getArguments()) {
      if (!fn.getArgAttr(arg.getArgNumber(), graph::GraphDialect::kInputAttr))
        continue;
      std::optional<sbprt::NdSbp> layout = layoutOf(arg);
      if (layout && (*layout)[axis].isSplit() && (*layout)[axis].dim == 0 && mesh.shape[axis] > 1) {
        axes.push_back(axis);
        break;
      }
    }
  return axes;
}

std::vector<Operation *> accumulatingAdds(Operation *update) {
  std::vector<Operation *> adds;
  Operation *next = update;
  for (Operation *add = update->getOperand(1).getDefiningOp();
       add && add->hasAttr(graph::GraphDialect::kAccumulateAttr) && add->getNumOperands() == 2 &&
       llvm::all_of(add->getUsers(), [&](Operation *user) { return user == next; });
       next = add, add = add->getOperand(0).getDefiningOp())
    adds.push_back(add);
  return adds;
}

std::vector<size_t> zeroSplit(const sbprt::Mesh &mesh, sbprt::NdSbp &layout, Value value,
                              ArrayRef<size_t> axes) {
  std::vector<size_t> split;
  for (size_t axis : axes) {
    std::vector<int64_t> local = localShape(mesh, layout, shapeOf(value));
    auto splitElsewhere = [&](int64_t d, size_t from, size_t to) {
      for (size_t other = from; other < to; ++other)
        if (other != axis && layout[other].isSplit() && layout[other].dim == d)
          return true;
      return false;
    };
    auto splitBefore = [&](int64_t d) { return splitElsewhere(d, 0, axis); };
    std::optional<int64_t> best;
    auto better = [&](int64_t d) {
      if (!best)
        return true;
      // Whole dimensions first, then the largest.
      if (splitBefore(d) != splitBefore(*best))
        return !splitBefore(d);
      return local[d] > local[*best];
    };
    for (int64_t d = 0; d < static_cast<int64_t>(local.size()); ++d) {
      sbprt::NdSbp candidate = layout;
      candidate[axis] = sbprt::Sbp::split(d);
      if (!splitElsewhere(d, axis + 1, layout.size()) &&
          checkValueLayout(mesh, candidate, value).empty() && better(d))
        best = d;
    }
    if (best) {
      layout[axis] = sbprt::Sbp::split(*best);
      split.push_back(axis);
    }
  }
  return split;
}

void setSignature(Operation *op, ArrayRef<sbprt::NdSbp> operands,
                  ArrayRef<sbprt::NdSbp> results) {
  setSignature(op, layoutsAttr(op->getContext(), operands), layoutsAttr(op->getContext(), results));
}

void setSignature(Operation *op, ArrayAttr operands, ArrayAttr results) {
  NamedAttrList attrs(op->getDiscardableAttrDictionary());
  attrs.set(kOperandLayouts, operands);
  attrs.set(kResultLayouts, results);
  op->setDiscardableAttrs(attrs.getDictionary(op->getContext()));
}

std::string checkValueLayout(const sbprt::Mesh &mesh, const sbprt::NdSbp &layout, Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return "a layout needs a statically shaped tensor, not " +
           [&] {
             std::string text;
             llvm::raw_string_ostream os(text);
             os << value.getType();
             return text;
           }();
  return sbprt::checkLayout(mesh, layout, shapeOf(value), isa<FloatType>(type.getElementType()));
}

std::vector<int64_t> shapeOf(Value value) {
  auto shape = cast<RankedTensorType>(value.getType()).getShape();
  return {shape.begin(), shape.end()};
}

size_t elementBytes(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementTypeBitWidth() / 8;
}

int64_t localBytes(const sbprt::Mesh &mesh, const sbprt::NdSbp &layout, Value value,
                   size_t elementBytes) {
  int64_t n = static_cast<int64_t>(elementBytes ? elementBytes : sbp::elementBytes(value));
  for (int64_t extent : localShape(mesh, layout, shapeOf(value)))
    n *= extent;
  return n;
}

double computeSecondsOf(Operation *op, const NdSignature &sig, const sbprt::Mesh &mesh,
                        const Cluster &cluster, const ElementSizes &sizes) {
  std::vector<Shape> operands, results;
  double bytes = 0;
  // Bytes touched: what flash attention never stores is neither read nor
  // written.
  auto local = [&](Value v, size_t elementBytes, const sbprt::NdSbp &layout,
                   std::vector<Shape> &out) {
    std::vector<int64_t> shape = localShape(mesh, layout, shapeOf(v));
    bytes += static_cast<double>(elementBytes) * sbprt::numElements(shape) *
             sizes.storedShare(v);
    out.emplace_back(shape.begin(), shape.end());
  };
  for (auto [use, layout] : llvm::zip(op->getOpOperands(), sig.operands))
    local(use.get(), sizes.ofUse(use), layout, operands);
  for (auto [v, layout] : llvm::zip(op->getResults(), sig.results))
    local(v, sizes.of(v), layout, results);
  double flops = cast<SbpOpInterface>(op).getFlops(operands, results);
  return computeSeconds(cluster, flops, bytes, sizes.computesInBf16(op));
}

ElementSizes::ElementSizes(func::FuncOp fn) {
  auto module = fn->getParentOfType<ModuleOp>();
  auto precision = module ? module->getAttrOfType<StringAttr>(kModulePrecision) : nullptr;
  if (!precision || precision.getValue() != "bf16")
    return;
  auto isInput = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner()->isEntryBlock() &&
           fn.getArgAttr(arg.getArgNumber(), graph::GraphDialect::kInputAttr);
  };
  auto isStore = [](Operation *op) { return isa<func::ReturnOp>(op); };
  storage = graph::findF32Storage(fn.getBody().front(), isInput, isStore);
  if (module->hasAttr(kModuleFusedAttention))
    attention_ = graph::findFusedAttention(fn.getBody().front(),
                                           [&](Value v) { return of(v) == 2; });
}

static bool allFuse(unsigned) { return true; }

double ElementSizes::storedShare(Value value) const { return storedShare(value, allFuse); }

double ElementSizes::storedShare(Value value, function_ref<bool(unsigned)> fuses) const {
  return attention_ ? attention_->storedShare(value, of(value), fuses) : 1.0;
}

Operation *ElementSizes::livesUntil(Value value) const {
  return attention_ ? attention_->livesUntil(value, allFuse) : nullptr;
}

static bool isFloat(Value value) {
  return isa<FloatType>(cast<RankedTensorType>(value.getType()).getElementType());
}

size_t ElementSizes::of(Value value) const {
  return storage && isFloat(value) && !storage->isF32(value) ? 2 : elementBytes(value);
}

size_t ElementSizes::ofUse(OpOperand &use) const {
  return storage && isFloat(use.get()) && !storage->uses.contains(&use) ? 2
                                                                         : elementBytes(use.get());
}

size_t elementBytes(BoxingOp boxing) {
  return boxing->hasAttr(kBoxingBf16) ? 2 : elementBytes(boxing.getInput());
}

const BoxingPlan &BoxingPlans::get(Value value, const sbprt::NdSbp &from,
                                   const sbprt::NdSbp &to, size_t elementBytes) {
  std::vector<int64_t> shape = shapeOf(value);
  std::string key = sbprt::toString(from) + sbprt::toString(to) + sbprt::shapeToString(shape) +
                    std::to_string(elementBytes);
  auto it = plans.find(key);
  if (it != plans.end())
    return it->second;
  std::string error;
  std::optional<BoxingPlan> plan =
      planBoxing(mesh, from, to, shape, elementBytes, cluster, error);
  // Both layouts were checked where they were chosen; a plan always exists.
  return plans[key] = plan ? *plan : BoxingPlan{};
}

LogicalResult forEachFunction(ModuleOp module, const std::string &clusterName,
                              function_ref<LogicalResult(func::FuncOp, LayoutContext &)> body) {
  std::string error;
  std::optional<Cluster> cluster = loadCluster(clusterName, error);
  if (!cluster)
    return module.emitError() << error;
  FailureOr<MeshOp> meshOp = findMesh(module);
  if (failed(meshOp))
    return failure();
  sbprt::Mesh mesh = meshOp->toMesh();
  BoxingPlans plans(mesh, *cluster);
  LayoutContext context{*meshOp, mesh, *cluster, &plans};
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal() && failed(body(fn, context)))
      return failure();
  return success();
}

std::vector<const void *> signatureKey(Operation *op) {
  NamedAttrList attrs(op->getAttrDictionary());
  for (llvm::StringLiteral mark :
       {graph::GraphDialect::kRegionAttr, graph::GraphDialect::kSelectiveAttr, kMicroBatch,
        kOperandLayouts, kResultLayouts, kRunnerUp, kStarts})
    attrs.erase(mark);
  std::vector<const void *> key{op->getName().getAsOpaquePointer(),
                                attrs.getDictionary(op->getContext()).getAsOpaquePointer()};
  for (Type t : op->getOperandTypes())
    key.push_back(t.getAsOpaquePointer());
  key.push_back(nullptr);
  for (Type t : op->getResultTypes())
    key.push_back(t.getAsOpaquePointer());
  return key;
}

const std::vector<NdSignature> &SignatureCache::of(Operation *op) {
  std::vector<const void *> key = signatureKey(op);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(std::move(key), ndSignatures(op, mesh)).first;
  return it->second;
}

std::optional<SmallVector<unsigned>> updateStateOperands(Operation *op) {
  if (isa<graph::AdamwUpdateOp>(op))
    return SmallVector<unsigned>{2, 3};
  if (isa<graph::SgdUpdateOp>(op))
    return SmallVector<unsigned>{2};
  return std::nullopt;
}

std::optional<SmallVector<unsigned>> updateReplacedOperands(Operation *op) {
  std::optional<SmallVector<unsigned>> states = updateStateOperands(op);
  if (states)
    states->insert(states->begin(), 0);
  return states;
}

std::string describeLocation(Location loc) {
  std::string text = formatLocation(loc, /*fileNameOnly=*/true);
  return text.empty() ? "an unknown location" : text;
}

} // namespace sbpc::sbp
