// The exec dialect: registration and verifiers. Shapes are checked against
// the module's sbp.mesh: a collective on an axis of p devices multiplies or
// divides one dimension by p, a load's type is the block its layout gives.
#include "dialects/Exec/IR/ExecOps.h"

#include "dialects/Common/Shapes.h"

#include "dialects/Sbp/IR/SbpOps.h"
#include "runtime/Tensor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"

#include <limits>

using namespace mlir;
using namespace sbpc::exec;
using sbpc::sbp::parseNdSbp;
using sbpc::sbp::printNdSbp;

#include "dialects/Exec/IR/ExecDialect.cpp.inc"

void ExecDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Exec/IR/ExecOps.cpp.inc"
      >();
}

bool sbpc::exec::isProgram(Operation *fn) { return fn->hasAttr(kProgramRanks); }

DictionaryAttr sbpc::exec::indexPlaceAttr(MLIRContext *ctx, const sbprt::IndexPlace &place,
                                          const sbprt::NdSbp &layout) {
  Builder b(ctx);
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("shape", b.getDenseI64ArrayAttr(place.shape)),
      b.getNamedAttr("layout", sbp::NdSbpAttr::get(ctx, layout))};
  if (!place.origin.empty()) {
    SmallVector<Attribute> slices;
    for (const sbprt::IndexPlace::Slice &slice : place.slices)
      for (const std::vector<int64_t> *part : {&slice.result, &slice.source, &slice.starts})
        slices.push_back(b.getDenseI64ArrayAttr(*part));
    entries.push_back(b.getNamedAttr("slices", b.getArrayAttr(slices)));
    entries.push_back(b.getNamedAttr("origin", b.getStringAttr(place.origin)));
    entries.push_back(b.getNamedAttr("origin_shape", b.getDenseI64ArrayAttr(place.originShape)));
  }
  return b.getDictionaryAttr(entries);
}

std::optional<std::pair<sbprt::IndexPlace, sbprt::NdSbp>>
sbpc::exec::parseIndexPlace(DictionaryAttr attr) {
  auto shape = attr.getAs<DenseI64ArrayAttr>("shape");
  auto layout = attr.getAs<sbp::NdSbpAttr>("layout");
  if (!shape || !layout)
    return std::nullopt;
  sbprt::IndexPlace place;
  place.shape.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
  if (auto origin = attr.getAs<StringAttr>("origin")) {
    auto slices = attr.getAs<ArrayAttr>("slices");
    auto originShape = attr.getAs<DenseI64ArrayAttr>("origin_shape");
    if (!slices || !originShape || slices.size() % 3)
      return std::nullopt;
    for (size_t i = 0; i < slices.size(); i += 3) {
      std::vector<int64_t> parts[3];
      for (size_t k = 0; k < 3; ++k) {
        auto part = dyn_cast<DenseI64ArrayAttr>(slices[i + k]);
        if (!part)
          return std::nullopt;
        parts[k].assign(part.asArrayRef().begin(), part.asArrayRef().end());
      }
      place.slices.push_back({parts[0], parts[1], parts[2]});
    }
    place.origin = origin.getValue().str();
    place.originShape.assign(originShape.asArrayRef().begin(), originShape.asArrayRef().end());
  }
  return std::make_pair(std::move(place), layout.toLayout());
}

std::optional<sbprt::Sbp::Reduce> sbpc::exec::parseReduce(StringRef text) {
  if (text == "sum")
    return sbprt::Sbp::Reduce::Sum;
  if (text == "max")
    return sbprt::Sbp::Reduce::Max;
  return std::nullopt;
}

StringRef sbpc::exec::reduceName(sbprt::Sbp::Reduce reduce) {
  return reduce == sbprt::Sbp::Reduce::Sum ? "sum" : "max";
}

namespace {

/// The mesh of the module `op` is in: its only sbp.mesh.
FailureOr<sbprt::Mesh> meshOf(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  sbpc::sbp::MeshOp found;
  if (module)
    for (auto mesh : module.getOps<sbpc::sbp::MeshOp>()) {
      if (found)
        return op->emitOpError() << "needs exactly one sbp.mesh in its module";
      found = mesh;
    }
  if (!found)
    return op->emitOpError() << "needs an sbp.mesh in its module";
  return found.toMesh();
}

/// The size of mesh axis `axis`; an error when there is no such axis.
FailureOr<int64_t> axisSize(Operation *op, int64_t axis) {
  FailureOr<sbprt::Mesh> mesh = meshOf(op);
  if (failed(mesh))
    return failure();
  if (axis < 0 || axis >= static_cast<int64_t>(mesh->shape.size()))
    return op->emitOpError() << "mesh axis " << axis << " does not exist (the mesh has "
                             << mesh->shape.size() << ")";
  return mesh->shape[axis];
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

LogicalResult checkReduce(Operation *op, StringRef reduce) {
  if (!parseReduce(reduce))
    return op->emitOpError() << "reduction must be \"sum\" or \"max\", got \"" << reduce << "\"";
  return success();
}

/// Layout changes move elements, they do not convert them.
LogicalResult checkSameElementType(Operation *op) {
  Type in = cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
  Type out = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  if (in != out)
    return op->emitOpError() << "result element type " << out << " differs from the input's "
                             << in;
  return success();
}

/// Whether `to` is `from` with dimension `dim` multiplied (`grows`) or
/// divided by `p`; an error saying what differs otherwise.
LogicalResult checkScaled(Operation *op, ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                          int64_t dim, int64_t p, bool grows, StringRef what) {
  if (failed(checkSameElementType(op)))
    return failure();
  if (from.size() != to.size())
    return op->emitOpError() << "result rank " << to.size() << " differs from input rank "
                             << from.size();
  if (dim < 0 || dim >= static_cast<int64_t>(from.size()))
    return op->emitOpError() << what << " dimension " << dim << " is out of range for rank "
                             << from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    int64_t expected = static_cast<int64_t>(d) != dim ? from[d]
                       : grows                         ? from[d] * p
                                                       : from[d] / p;
    if (static_cast<int64_t>(d) == dim && !grows && from[d] % p != 0)
      return op->emitOpError() << "dimension " << dim << " of size " << from[d]
                               << " does not split into " << p << " parts";
    if (to[d] != expected)
      return op->emitOpError() << "result dimension " << d << " is " << to[d] << ", expected "
                               << expected << " on a mesh axis of " << p << " devices";
  }
  return success();
}

/// The type of a shard: the block of `global` that `layout` gives a rank.
LogicalResult checkShard(Operation *op, ArrayRef<int64_t> global, sbpc::sbp::NdSbpAttr layout,
                         Type localType) {
  FailureOr<sbprt::Mesh> mesh = meshOf(op);
  if (failed(mesh))
    return failure();
  auto type = cast<RankedTensorType>(localType);
  std::vector<int64_t> shape(global.begin(), global.end());
  std::string problem = sbprt::checkLayout(*mesh, layout.toLayout(), shape,
                                           isa<FloatType>(type.getElementType()));
  if (!problem.empty())
    return op->emitOpError() << "layout " << sbprt::toString(layout.toLayout()) << ": "
                             << problem;
  std::vector<int64_t> local = sbprt::blockOf(*mesh, layout.toLayout(), shape, 0).sizes;
  if (ArrayRef<int64_t>(local) != type.getShape())
    return op->emitOpError() << "local type " << localType << " is not the shard "
                             << sbprt::shapeToString(local) << " of global shape "
                             << sbprt::shapeToString(shape) << " under "
                             << sbprt::toString(layout.toLayout());
  return success();
}

} // namespace

/// A file's shape `stored`, if any, holds as many elements as `global`.
static LogicalResult checkStoredShape(Operation *op, std::optional<ArrayRef<int64_t>> stored,
                                      ArrayRef<int64_t> global) {
  if (stored && sbprt::numElements({stored->begin(), stored->end()}) !=
                    sbprt::numElements({global.begin(), global.end()}))
    return op->emitOpError() << "stored shape "
                             << sbprt::shapeToString({stored->begin(), stored->end()})
                             << " does not hold as many elements as the global shape";
  return success();
}

LogicalResult LoadOp::verify() {
  if (getKind() != "param" && getKind() != "input")
    return emitOpError() << "kind must be \"param\" or \"input\", got \"" << getKind() << "\"";
  if (getStoredShape() && getKind() != "param")
    return emitOpError() << "only parameters have a stored shape";
  if (failed(checkStoredShape(*this, getStoredShape(), getGlobalShape())))
    return failure();
  return checkShard(*this, getGlobalShape(), getLayout(), getType());
}

LogicalResult StoreOp::verify() {
  if (failed(checkStoredShape(*this, getStoredShape(), getGlobalShape())))
    return failure();
  std::optional<ArrayRef<int64_t>> rows = getRows();
  if (!rows)
    return checkShard(*this, getGlobalShape(), getLayout(), getValue().getType());
  // A piece: the shard's rows i, i + n, ...
  if (rows->size() != 2 || (*rows)[1] < 2 || (*rows)[0] < 0 || (*rows)[0] >= (*rows)[1])
    return emitOpError() << "rows must be [i, n] with 0 <= i < n and n >= 2";
  int64_t n = (*rows)[1];
  auto type = cast<RankedTensorType>(getValue().getType());
  if (type.getRank() == 0 || getGlobalShape().empty())
    return emitOpError() << "stores rows of a scalar";
  FailureOr<sbprt::Mesh> mesh = meshOf(*this);
  if (failed(mesh))
    return failure();
  std::vector<int64_t> global(getGlobalShape().begin(), getGlobalShape().end());
  std::vector<int64_t> shard = sbprt::blockOf(*mesh, getLayout().toLayout(), global, 0).sizes;
  if (shard[0] % n != 0)
    return emitOpError() << "a shard of " << shard[0] << " rows cannot be stored in " << n
                         << " pieces";
  global[0] /= n;
  return checkShard(*this, global, getLayout(), type);
}

LogicalResult AllReduceOp::verify() {
  if (failed(axisSize(*this, getAxis())))
    return failure();
  return checkReduce(*this, getReduce());
}

LogicalResult AllGatherOp::verify() {
  FailureOr<int64_t> p = axisSize(*this, getAxis());
  return failure(failed(p) || failed(checkScaled(*this, shapeOf(getInput()), shapeOf(getResult()),
                                                 getDim(), *p, true, "gathered")));
}

LogicalResult ReduceScatterOp::verify() {
  FailureOr<int64_t> p = axisSize(*this, getAxis());
  if (failed(p) || failed(checkReduce(*this, getReduce())))
    return failure();
  return checkScaled(*this, shapeOf(getInput()), shapeOf(getResult()), getDim(), *p, false,
                     "scattered");
}

LogicalResult AllToAllOp::verify() {
  FailureOr<int64_t> p = axisSize(*this, getAxis());
  if (failed(p))
    return failure();
  if (getSplitDim() == getConcatDim())
    return emitOpError() << "split and concat dimensions must differ";
  ArrayRef<int64_t> in = shapeOf(getInput());
  int64_t concat = static_cast<int64_t>(getConcatDim());
  if (concat < 0 || concat >= static_cast<int64_t>(in.size()))
    return emitOpError() << "concat dimension " << concat << " is out of range for rank "
                         << in.size();
  SmallVector<int64_t> grown(in);
  grown[concat] *= *p;
  return checkScaled(*this, grown, shapeOf(getResult()), getSplitDim(), *p, false, "split");
}

LogicalResult LocalSliceOp::verify() {
  FailureOr<int64_t> p = axisSize(*this, getAxis());
  return failure(failed(p) || failed(checkScaled(*this, shapeOf(getInput()), shapeOf(getResult()),
                                                 getDim(), *p, false, "sliced")));
}

LogicalResult ZeroPadOp::verify() {
  FailureOr<int64_t> p = axisSize(*this, getAxis());
  if (failed(p) || failed(checkReduce(*this, getReduce())))
    return failure();
  return checkScaled(*this, shapeOf(getInput()), shapeOf(getResult()), getDim(), *p, true,
                     "padded");
}

LogicalResult BroadcastOp::verify() {
  FailureOr<int64_t> p = axisSize(*this, getAxis());
  if (failed(p))
    return failure();
  if (static_cast<int64_t>(getRoot()) < 0 || static_cast<int64_t>(getRoot()) >= *p)
    return emitOpError() << "root " << static_cast<int64_t>(getRoot())
                         << " is not a coordinate of an axis of " << *p << " devices";
  return success();
}

LogicalResult KeepOneOp::verify() { return failure(failed(axisSize(*this, getAxis()))); }

/// A peer is a coordinate of the axis other than this rank's own (which
/// the program cannot know, but a peer of an axis of one device can only
/// be); a tag fits MPI's guaranteed range.
static LogicalResult checkPeer(Operation *op, int64_t axis, int64_t peer, int64_t tag) {
  FailureOr<int64_t> p = axisSize(op, axis);
  if (failed(p))
    return failure();
  if (peer < 0 || peer >= *p)
    return op->emitOpError() << "peer " << peer << " is not a coordinate of an axis of " << *p
                             << " devices";
  if (*p == 1)
    return op->emitOpError() << "has no peer on an axis of one device";
  if (tag < 0 || tag > 32767)
    return op->emitOpError() << "tag " << tag << " is out of range (0 to 32767)";
  return success();
}

LogicalResult SendOp::verify() { return checkPeer(*this, getAxis(), getPeer(), getTag()); }
LogicalResult RecvOp::verify() { return checkPeer(*this, getAxis(), getPeer(), getTag()); }

LogicalResult ConvertOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError() << "cannot change the shape from " << getInput().getType() << " to "
                         << getType();
  return success();
}

LogicalResult FusedOp::verify() {
  auto resultType = getResult().getType();
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size() << " inputs but its body takes "
                         << body.getNumArguments();
  for (auto [input, arg] : llvm::zip(getInputs(), body.getArguments())) {
    if (input.getType() != arg.getType())
      return emitOpError() << "body argument " << arg.getArgNumber() << " is " << arg.getType()
                           << ", its input " << input.getType();
    // NumPy broadcasting: trailing dimensions equal or 1, none extra.
    auto shape = cast<RankedTensorType>(input.getType()).getShape();
    auto out = resultType.getShape();
    bool fits = shape.size() <= out.size();
    for (size_t d = 0; fits && d < shape.size(); ++d) {
      int64_t dim = shape[shape.size() - 1 - d];
      fits = dim == 1 || dim == out[out.size() - 1 - d];
    }
    if (!fits)
      return emitOpError() << "input " << arg.getArgNumber() << " of type " << input.getType()
                           << " does not broadcast to " << resultType;
  }
  for (Operation &op : body.without_terminator())
    if (op.getNumResults() != 1 || op.getResult(0).getType() != resultType)
      return op.emitOpError() << "in exec.fused must make one value of the result's type "
                              << resultType;
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValue().getType() != resultType)
    return emitOpError() << "must yield a value of its result's type " << resultType;
  return success();
}

/// exec.linear: input [..., M, K] of rank 2 or more, weight [K, N] ([N, K]
/// with transpose_rhs), bias [N], result [..., M, N], one element type; a
/// residual of the result's type, not with the GELU.
LogicalResult LinearOp::verify() {
  auto input = getInput().getType(), weight = getWeight().getType(),
       bias = getBias().getType(), result = getResult().getType();
  if (Value residual = getResidual()) {
    if (residual.getType() != result)
      return emitOpError() << "residual " << residual.getType() << " must have the result's type "
                           << result;
    if (getGelu())
      return emitOpError() << "takes a residual or the GELU, not both";
  }
  for (RankedTensorType type : {weight, bias, result})
    if (type.getElementType() != input.getElementType())
      return emitOpError() << "operands and result must have one element type, got "
                           << input.getElementType() << " and " << type.getElementType();
  if (input.getRank() < 2 || weight.getRank() != 2 || bias.getRank() != 1)
    return emitOpError() << "needs an input of rank 2 or more, a rank-2 weight and a rank-1 "
                            "bias, got "
                         << input << ", " << weight << " and " << bias;
  int64_t k = input.getShape().back();
  int64_t weightK = weight.getDimSize(getTransposeRhs() ? 1 : 0);
  int64_t n = weight.getDimSize(getTransposeRhs() ? 0 : 1);
  if (weightK != k)
    return emitOpError() << "contracts " << k << " input columns with " << weightK
                         << " weight rows";
  if (bias.getDimSize(0) != n)
    return emitOpError() << "bias " << bias << " must have the " << n << " output columns";
  SmallVector<int64_t> expected(input.getShape());
  expected.back() = n;
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result " << result << " must have shape "
                         << RankedTensorType::get(expected, input.getElementType());
  if (Value preactivation = getPreactivation()) {
    if (!getGelu())
      return emitOpError() << "has a preactivation result only with the GELU";
    if (preactivation.getType() != result)
      return emitOpError() << "preactivation " << preactivation.getType()
                           << " must have the result's type " << result;
  }
  return success();
}

/// A bias gradient: `n` elements of `element`, in any shape (the kept or
/// dropped dimensions of the graph.reduce_sum it replaces).
static LogicalResult verifyBiasGrad(Operation *op, Value biasGrad, int64_t n, Type element) {
  auto type = cast<RankedTensorType>(biasGrad.getType());
  if (type.getElementType() != element || type.getNumElements() != n)
    return op->emitOpError() << "bias gradient " << type << " must have " << n << " elements of "
                             << element;
  return success();
}

/// exec.matmul_gelu_grad: grad [..., M, K] of rank 2 or more, weight [K, N]
/// ([N, K] with transpose_rhs), preactivation [..., M, N], one element type.
LogicalResult MatmulGeluGradOp::verify() {
  auto grad = getGrad().getType(), weight = getWeight().getType(),
       preactivation = getPreactivation().getType(), result = getResult().getType();
  for (RankedTensorType type : {weight, preactivation, result})
    if (type.getElementType() != grad.getElementType())
      return emitOpError() << "operands and results must have one element type, got "
                           << grad.getElementType() << " and " << type.getElementType();
  if (grad.getRank() < 2 || weight.getRank() != 2)
    return emitOpError() << "needs a gradient of rank 2 or more and a rank-2 weight, got " << grad
                         << " and " << weight;
  int64_t k = grad.getShape().back(), weightK = weight.getDimSize(getTransposeRhs() ? 1 : 0);
  int64_t n = weight.getDimSize(getTransposeRhs() ? 0 : 1);
  if (weightK != k)
    return emitOpError() << "contracts " << k << " gradient columns with " << weightK
                         << " weight rows";
  SmallVector<int64_t> expected(grad.getShape());
  expected.back() = n;
  if (preactivation.getShape() != ArrayRef<int64_t>(expected) || result != preactivation)
    return emitOpError() << "preactivation " << preactivation << " and result " << result
                         << " must have shape "
                         << RankedTensorType::get(expected, grad.getElementType());
  if (Value biasGrad = getBiasGrad())
    return verifyBiasGrad(*this, biasGrad, n, grad.getElementType());
  return success();
}

/// exec.matmul_bias_grad: input [T, K] and grad [T, N] make result [K, N]
/// and a bias gradient of N elements, one element type.
LogicalResult MatmulBiasGradOp::verify() {
  auto input = getInput().getType(), grad = getGrad().getType(), result = getResult().getType();
  if (input.getRank() != 2 || grad.getRank() != 2 || input.getDimSize(0) != grad.getDimSize(0))
    return emitOpError() << "needs rank-2 input and gradient with the same rows, got " << input
                         << " and " << grad;
  for (RankedTensorType type : {grad, result})
    if (type.getElementType() != input.getElementType())
      return emitOpError() << "operands and results must have one element type, got "
                           << input.getElementType() << " and " << type.getElementType();
  auto expected =
      RankedTensorType::get({input.getDimSize(1), grad.getDimSize(1)}, input.getElementType());
  if (result != expected)
    return emitOpError() << "result " << result << " must be " << expected;
  return verifyBiasGrad(*this, getBiasGrad(), grad.getDimSize(1), input.getElementType());
}

/// exec.causal_matmul: graph.matmul's shape rule (matmulShape), one element
/// type, and exactly one of lower_lhs (a square lhs) and lower_result (a
/// square result).
LogicalResult CausalMatmulOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType(), result = getResult().getType();
  if (lhs.getElementType() != rhs.getElementType() ||
      result.getElementType() != lhs.getElementType())
    return emitOpError() << "operands and result must have one element type, got " << lhs << ", "
                         << rhs << " and " << result;
  std::string why;
  auto expected = matmulShape(lhs.getShape(), rhs.getShape(), getTransposeLhs(),
                              getTransposeRhs(), why);
  if (!expected)
    return emitOpError() << why;
  if (result.getShape() != ArrayRef<int64_t>(*expected))
    return emitOpError() << "result " << result << " must have shape " << formatShape(*expected);
  size_t rank = lhs.getRank();
  int64_t m = lhs.getDimSize(rank - (getTransposeLhs() ? 1 : 2));
  int64_t k = lhs.getDimSize(rank - (getTransposeLhs() ? 2 : 1)), n = expected->back();
  if (getLowerLhs() == getLowerResult())
    return emitOpError() << "needs exactly one of lower_lhs and lower_result";
  if (getLowerLhs() ? m != k : m != n)
    return emitOpError() << (getLowerLhs() ? "with lower_lhs needs a square lhs, got "
                                           : "with lower_result needs a square result, got ")
                         << (getLowerLhs() ? lhs : result);
  return success();
}

/// exec.softmax and exec.softmax_grad: scores of rank 1 or more, a causal
/// mask on square trailing dimensions.
static LogicalResult verifyScores(Operation *op, RankedTensorType type, bool causal) {
  auto shape = type.getShape();
  if (shape.empty())
    return op->emitOpError() << "needs scores of rank 1 or more, got " << type;
  if (causal && (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2]))
    return op->emitOpError() << "with causal needs square trailing dimensions, got " << type;
  return success();
}

/// The scale is in the scores' precision.
static LogicalResult verifyScale(Operation *op, Value scale, RankedTensorType scores) {
  if (scale && cast<RankedTensorType>(scale.getType()).getElementType() != scores.getElementType())
    return op->emitOpError() << "scale " << scale.getType() << " must have the element type of "
                             << scores;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  if (failed(verifyScale(*this, getScale(), getInput().getType())))
    return failure();
  return verifyScores(*this, getInput().getType(), getCausal());
}

LogicalResult SoftmaxGradOp::verify() {
  if (failed(verifyScale(*this, getScale(), getProbs().getType())))
    return failure();
  return verifyScores(*this, getProbs().getType(), getCausal());
}

/// exec.attention and its gradient: query [..., S, D], key [..., T, D],
/// value [..., T, Dv] and result (the forward's output) [..., S, Dv] with
/// the same leading dimensions, one element type (the scale's too); S = T
/// under the causal mask; the log-sum-exp, when there is one, [..., S].
static LogicalResult verifyAttention(Operation *op, Value queryValue, Value keyValue,
                                     Value valueValue, Value resultValue, Value lseValue,
                                     Value scale, bool causal) {
  auto query = cast<RankedTensorType>(queryValue.getType()),
       key = cast<RankedTensorType>(keyValue.getType()),
       value = cast<RankedTensorType>(valueValue.getType()),
       result = cast<RankedTensorType>(resultValue.getType());
  for (RankedTensorType type : {key, value, result})
    if (type.getElementType() != query.getElementType())
      return op->emitOpError() << "operands and result must have one element type, got "
                               << query.getElementType() << " and " << type.getElementType();
  if (failed(verifyScale(op, scale, query)))
    return failure();
  int64_t rank = query.getRank();
  if (rank < 2 || key.getRank() != rank || value.getRank() != rank || result.getRank() != rank ||
      query.getShape().drop_back(2) != key.getShape().drop_back(2) ||
      query.getShape().drop_back(2) != value.getShape().drop_back(2))
    return op->emitOpError() << "needs query, key and value of one rank (2 or more) and the same "
                                "leading dimensions, got "
                             << query << ", " << key << " and " << value;
  int64_t s = query.getDimSize(rank - 2), d = query.getDimSize(rank - 1);
  int64_t t = key.getDimSize(rank - 2), dv = value.getDimSize(rank - 1);
  if (key.getDimSize(rank - 1) != d || value.getDimSize(rank - 2) != t)
    return op->emitOpError() << "needs keys of the queries' width and a value per key, got "
                             << query << ", " << key << " and " << value;
  SmallVector<int64_t> expected(query.getShape());
  expected.back() = dv;
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError() << "result " << result << " must have shape "
                             << RankedTensorType::get(expected, query.getElementType());
  if (causal && s != t)
    return op->emitOpError() << "with causal needs as many keys as queries, got " << s << " and "
                             << t;
  if (lseValue) {
    auto lse = cast<RankedTensorType>(lseValue.getType());
    if (lse.getShape() != query.getShape().drop_back())
      return op->emitOpError() << "log-sum-exp " << lse << " must have shape "
                               << RankedTensorType::get(query.getShape().drop_back(),
                                                        lse.getElementType());
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttention(*this, getQuery(), getKey(), getValue(), getResult(), getLse(),
                         getScale(), getCausal());
}

/// exec.attention_grad: exec.attention's operands, output and log-sum-exp;
/// the output's gradient of its type; and the gradients of the query, key
/// and value of theirs.
LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(), getOutput(), getLse(),
                             getScale(), getCausal())))
    return failure();
  if (getGrad().getType() != getOutput().getType())
    return emitOpError() << "gradient " << getGrad().getType() << " must have the output's type "
                         << getOutput().getType();
  for (auto [operand, gradient] : {std::make_pair(getQuery(), getQueryGrad()),
                                   std::make_pair(getKey(), getKeyGrad()),
                                   std::make_pair(getValue(), getValueGrad())})
    if (operand.getType() != gradient.getType())
      return emitOpError() << "gradient " << gradient.getType() << " must have its operand's type "
                           << operand.getType();
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Exec/IR/ExecOps.cpp.inc"
