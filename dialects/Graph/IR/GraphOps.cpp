// Shape inference and verification for the graph dialect.
//
// Each op's inferReturnTypes is the single statement of its shape rule: the
// verifier compares the inferred type with the written one, and generators
// build ops without spelling result types.
#include "dialects/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <sstream>

using namespace mlir;
using namespace sbpc::graph;

#include "dialects/Graph/IR/GraphDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Graph/IR/GraphOps.cpp.inc"
      >();
}

bool sbpc::graph::isValidShape(ShapedType type) {
  if (!type.hasStaticShape())
    return false;
  int64_t bytes = 8;
  for (int64_t size : type.getShape())
    if (size < 1 || llvm::MulOverflow(bytes, size, bytes))
      return false;
  return true;
}

std::optional<SmallVector<int64_t>> sbpc::graph::broadcastShapes(ArrayRef<int64_t> lhs,
                                                                 ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1)
      return std::nullopt;
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Function argument and result attributes
//===----------------------------------------------------------------------===//

static LogicalResult verifyNameAttr(Operation *op, NamedAttribute attr) {
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' must be a non-empty string";
  // Names become file names, safetensors keys and command-line NAME=FILE
  // arguments: control characters (a NUL ends a file name early) have no
  // place in them.
  if (llvm::any_of(name.getValue(),
                   [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    std::string escaped;
    llvm::raw_string_ostream os(escaped);
    llvm::printEscapedString(name.getValue(), os);
    return op->emitOpError() << "'" << attr.getName().getValue() << "' \"" << escaped
                             << "\" must not hold control characters";
  }
  return success();
}

/// graph.param_shape on `what` (an argument or a result) of type `type`
/// (null where the function has no body): positive sizes, as many
/// elements as the type.
static LogicalResult verifyStoredShape(Operation *op, NamedAttribute attr, const std::string &what,
                                       Type type) {
  auto stored = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (!stored || llvm::any_of(stored.asArrayRef(), [](int64_t d) { return d <= 0; }))
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' must be an array<i64> of positive sizes";
  if (!type)
    return success();
  auto tensor = dyn_cast<RankedTensorType>(type);
  int64_t storedCount = 1;
  for (int64_t d : stored.asArrayRef())
    storedCount *= d;
  if (!tensor || !tensor.hasStaticShape() || tensor.getNumElements() != storedCount)
    return op->emitOpError() << what << " has stored shape " << formatShape(stored.asArrayRef())
                             << " whose element count differs from its type " << type;
  return success();
}

LogicalResult GraphDialect::verifyRegionArgAttribute(Operation *op, unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kParamAttr || name == kInputAttr)
    return verifyNameAttr(op, attr);
  if (name != kParamShapeAttr)
    return op->emitOpError() << "unknown argument attribute '" << name << "'";
  // Only a checkpoint's tensors have a stored shape of their own.
  if (auto fn = dyn_cast<FunctionOpInterface>(op); fn && !fn.getArgAttr(argIndex, kParamAttr))
    return op->emitOpError() << "argument #" << argIndex << " has '" << name
                             << "' but is not a parameter (graph.param): only parameters have a "
                                "stored shape";
  Region &region = op->getRegion(regionIndex);
  return verifyStoredShape(op, attr, "argument #" + std::to_string(argIndex),
                           region.empty() ? Type() : region.getArgument(argIndex).getType());
}

LogicalResult GraphDialect::verifyRegionResultAttribute(Operation *op, unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  if (attr.getName().getValue() == kOutputAttr) {
    if (failed(verifyNameAttr(op, attr)))
      return failure();
    // Outputs become <dir>/<name>.npy: a name must not leave the directory.
    StringRef name = cast<StringAttr>(attr.getValue()).getValue();
    if (name == "." || name == ".." || name.contains('/') || name.contains('\\'))
      return op->emitOpError() << "output name '" << name
                               << "' must be a plain file name (no '/', not '.' or '..')";
    return success();
  }
  if (attr.getName().getValue() == kParamShapeAttr) {
    auto fn = dyn_cast<FunctionOpInterface>(op);
    return verifyStoredShape(op, attr, "result #" + std::to_string(resultIndex),
                             fn ? fn.getResultTypes()[resultIndex] : Type());
  }
  return op->emitOpError() << "unknown result attribute '" << attr.getName().getValue()
                           << "'";
}

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

namespace {
/// Collects one op's shape-rule failure as a diagnostic at the op.
struct ShapeError {
  std::optional<Location> loc;
  StringRef opName;
  InFlightDiagnostic operator()() const {
    if (!loc)
      return InFlightDiagnostic();
    return mlir::emitError(*loc) << "'" << opName << "' op ";
  }
};
} // namespace

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// The element type the float operands among `values` share (f32, or bf16
/// in a --precision bf16 program): an op computes in one precision.
static FailureOr<Type> floatTypeOf(const ShapeError &error, ValueRange values) {
  Type common;
  for (Value value : values) {
    Type element = cast<RankedTensorType>(value.getType()).getElementType();
    if (!isa<FloatType>(element))
      continue;
    if (common && element != common) {
      (void)(error() << "float operands must have one element type, got " << common << " and "
                     << element);
      return failure();
    }
    common = element;
  }
  return common;
}

/// A tensor of `shape` in the precision of the float operands `values`.
static FailureOr<Type> floatTensor(const ShapeError &error, ValueRange values,
                                   ArrayRef<int64_t> shape) {
  FailureOr<Type> element = floatTypeOf(error, values);
  if (failed(element))
    return failure();
  return Type(RankedTensorType::get(shape, *element));
}

/// Appends floatTensor(...) to `types`.
static LogicalResult pushFloatTensor(const ShapeError &error, ValueRange values,
                                     ArrayRef<int64_t> shape, SmallVectorImpl<Type> &types) {
  FailureOr<Type> type = floatTensor(error, values, shape);
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

/// Checks that `axis` names a dimension of a rank-`rank` tensor.
static LogicalResult checkAxis(const ShapeError &error, StringRef what, int64_t axis,
                               int64_t rank) {
  if (axis >= 0 && axis < rank)
    return success();
  return error() << what << " " << axis << " is out of range for rank " << rank;
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getValue().getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }


/// The shape rule of the elementwise binary ops (used by their ODS class).
template <typename OpT>
static LogicalResult inferBroadcast(MLIRContext *ctx, std::optional<Location> loc,
                                    typename OpT::Adaptor adaptor,
                                    SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> lhs = shapeOf(adaptor.getLhs()), rhs = shapeOf(adaptor.getRhs());
  std::optional<SmallVector<int64_t>> shape = broadcastShapes(lhs, rhs);
  if (!shape)
    return ShapeError{loc, OpT::getOperationName()}()
           << "operand shapes " << formatShape(lhs) << " and " << formatShape(rhs)
           << " do not broadcast";
  return pushFloatTensor({loc, OpT::getOperationName()}, {adaptor.getLhs(), adaptor.getRhs()},
                         *shape, types);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  std::string why;
  auto shape = matmulShape(shapeOf(adaptor.getLhs()), shapeOf(adaptor.getRhs()),
                           adaptor.getTransposeLhs(), adaptor.getTransposeRhs(), why);
  if (!shape)
    return error() << why;
  return pushFloatTensor(error, {adaptor.getLhs(), adaptor.getRhs()}, *shape, types);
}

/// The shape rule of the reductions (used by their ODS class).
template <typename OpT>
static LogicalResult inferReduce(MLIRContext *ctx, std::optional<Location> loc,
                                 typename OpT::Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, OpT::getOperationName()};
  ArrayRef<int64_t> in = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (dims.empty())
    return error() << "needs at least one dimension to reduce";
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (failed(checkAxis(error, "reduced dimension", d, in.size())))
      return failure();
    if (i > 0 && dims[i - 1] >= d)
      return error() << "reduced dimensions " << formatShape(dims)
                     << " must be distinct and ascending";
  }
  SmallVector<int64_t> shape;
  for (auto [i, size] : llvm::enumerate(in)) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(i)))
      shape.push_back(size);
    else if (adaptor.getKeepdims())
      shape.push_back(1);
  }
  return pushFloatTensor(error, adaptor.getInput(), shape, types);
}

/// The axis of a softmax-like op names one of its dimensions.
template <typename OpT> static LogicalResult verifyAxis(OpT op) {
  return checkAxis(ShapeError{op.getLoc(), OpT::getOperationName()}, "axis", op.getAxis(),
                   op.getType().getRank());
}

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this); }

LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this); }

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  ArrayRef<int64_t> in = shapeOf(adaptor.getInput());
  if (in.empty())
    return error() << "input must have rank >= 1";
  for (auto [what, value] : {std::pair{"scale", adaptor.getScale()}, {"bias", adaptor.getBias()}})
    if (shapeOf(value) != in.take_back())
      return error() << what << " shape " << formatShape(shapeOf(value))
                     << " must be the normalized dimension " << formatShape(in.take_back())
                     << " of input " << formatShape(in);
  if (!(adaptor.getEps().convertToDouble() > 0.0))
    return error() << "eps must be positive";
  return pushFloatTensor(error, {adaptor.getInput(), adaptor.getScale(), adaptor.getBias()}, in,
                         types);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  ArrayRef<int64_t> in = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  if (perm.size() != in.size() || llvm::any_of(llvm::enumerate(sorted), [](auto e) {
        return e.value() != static_cast<int64_t>(e.index());
      }))
    return error() << "perm " << formatShape(perm) << " is not a permutation of the "
                   << in.size() << " dimensions of " << formatShape(in);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(in[p]);
  return pushFloatTensor(error, adaptor.getInput(), shape, types);
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "cannot change the element type from " << in.getElementType()
                         << " to " << out.getElementType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << formatShape(in.getShape()) << " ("
                         << in.getNumElements() << " elements) to "
                         << formatShape(out.getShape()) << " (" << out.getNumElements()
                         << " elements)";
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  ArrayRef<int64_t> in = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits();
  if (starts.size() != in.size() || limits.size() != in.size())
    return error() << "starts " << formatShape(starts) << " and limits "
                   << formatShape(limits) << " must each have one entry per dimension of "
                   << formatShape(in);
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < in.size(); ++d) {
    if (starts[d] < 0 || starts[d] >= limits[d] || limits[d] > in[d])
      return error() << "dimension " << d << " of size " << in[d] << " cannot be sliced ["
                     << starts[d] << ", " << limits[d] << ")";
    shape.push_back(limits[d] - starts[d]);
  }
  types.push_back(RankedTensorType::get(
      shape, cast<RankedTensorType>(adaptor.getInput().getType()).getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  if (adaptor.getInputs().empty())
    return error() << "needs at least one input";
  SmallVector<int64_t> shape(shapeOf(adaptor.getInputs().front()));
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(error, "axis", axis, shape.size())))
    return failure();
  for (Value input : adaptor.getInputs().drop_front()) {
    ArrayRef<int64_t> other = shapeOf(input);
    bool compatible = other.size() == shape.size();
    for (size_t d = 0; compatible && d < shape.size(); ++d)
      compatible = static_cast<int64_t>(d) == axis || other[d] == shape[d];
    if (!compatible)
      return error() << "input " << formatShape(other) << " does not match "
                     << formatShape(shapeOf(adaptor.getInputs().front()))
                     << " outside axis " << axis;
    if (llvm::AddOverflow(shape[axis], other[axis], shape[axis]))
      return error() << "concatenated axis " << axis << " is too large";
  }
  return pushFloatTensor(error, adaptor.getInputs(), shape, types);
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> table = shapeOf(adaptor.getTable());
  if (table.size() != 2)
    return ShapeError{loc, getOperationName()}()
           << "table must be [rows, width], got " << formatShape(table);
  SmallVector<int64_t> shape(shapeOf(adaptor.getIndices()));
  shape.push_back(table[1]);
  return pushFloatTensor({loc, getOperationName()}, adaptor.getTable(), shape, types);
}

/// Causal masking needs scores that end in a square [queries, keys] block.
static LogicalResult verifySquareScores(Operation *op, RankedTensorType type) {
  ArrayRef<int64_t> in = type.getShape();
  if (in.size() < 2 || in[in.size() - 1] != in[in.size() - 2])
    return op->emitOpError() << "input " << formatShape(in)
                             << " must end in a square [queries, keys]";
  return success();
}

LogicalResult CausalMaskOp::verify() { return verifySquareScores(*this, getType()); }

LogicalResult CausalMaskGradOp::verify() { return verifySquareScores(*this, getType()); }

/// Targets name one class per position: the logits shape without its last dimension.
static LogicalResult checkTargets(const ShapeError &error, Value logits, Value targets) {
  ArrayRef<int64_t> l = shapeOf(logits), t = shapeOf(targets);
  if (l.empty() || t != l.drop_back())
    return error() << "targets " << formatShape(t) << " must be the logits shape "
                   << formatShape(l) << " without its class dimension";
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkTargets({loc, getOperationName()}, adaptor.getLogits(), adaptor.getTargets())))
    return failure();
  return pushFloatTensor({loc, getOperationName()}, adaptor.getLogits(), {}, types);
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// Checks that each named operand has the shape of `reference` (named `refName`).
static LogicalResult checkSameShape(const ShapeError &error, StringRef refName, Value reference,
                                    ArrayRef<std::pair<StringRef, Value>> others) {
  for (auto [name, value] : others)
    if (shapeOf(value) != shapeOf(reference))
      return error() << name << " shape " << formatShape(shapeOf(value)) << " must equal "
                     << refName << " shape " << formatShape(shapeOf(reference));
  return success();
}

/// The shape rule of gradients taken elementwise against one forward
/// tensor: the gradient has that tensor's shape, and so has the result.
template <typename OpT>
static LogicalResult inferGradLike(std::optional<Location> loc, StringRef refName, Value ref,
                                   Value grad, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, OpT::getOperationName()};
  if (failed(checkSameShape(error, refName, ref, {{"grad", grad}})))
    return failure();
  return pushFloatTensor(error, {ref, grad}, shapeOf(ref), types);
}

LogicalResult SoftmaxGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkAxis({loc, getOperationName()}, "axis", adaptor.getAxis(),
                       shapeOf(adaptor.getOutput()).size())))
    return failure();
  return inferGradLike<SoftmaxGradOp>(loc, "output", adaptor.getOutput(), adaptor.getGrad(),
                                      types);
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  ArrayRef<int64_t> in = shapeOf(adaptor.getInput());
  if (in.empty())
    return error() << "input must have rank >= 1";
  if (shapeOf(adaptor.getScale()) != in.take_back())
    return error() << "scale shape " << formatShape(shapeOf(adaptor.getScale()))
                   << " must be the normalized dimension " << formatShape(in.take_back())
                   << " of input " << formatShape(in);
  if (failed(checkSameShape(error, "input", adaptor.getInput(), {{"grad", adaptor.getGrad()}})))
    return failure();
  if (!(adaptor.getEps().convertToDouble() > 0.0))
    return error() << "eps must be positive";
  SmallVector<Value, 3> operands = {adaptor.getInput(), adaptor.getScale(), adaptor.getGrad()};
  if (failed(pushFloatTensor(error, operands, in, types)))
    return failure();
  types.append(2, RankedTensorType::get(in.take_back(), *floatTypeOf(error, operands)));
  return success();
}

LogicalResult EmbeddingGradOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  ArrayRef<int64_t> indices = shapeOf(adaptor.getIndices()), grad = shapeOf(adaptor.getGrad());
  if (grad.empty() || grad.drop_back() != indices)
    return error() << "grad " << formatShape(grad) << " must be the indices shape "
                   << formatShape(indices) << " plus a width";
  int64_t rows = adaptor.getRowsAttr().getInt();
  if (rows < 1)
    return error() << "rows must be positive, got " << rows;
  return pushFloatTensor(error, adaptor.getGrad(), {rows, grad.back()}, types);
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  if (failed(checkTargets(error, adaptor.getLogits(), adaptor.getTargets())))
    return failure();
  return pushFloatTensor(error, {adaptor.getLogits(), adaptor.getLossGrad()},
                         shapeOf(adaptor.getLogits()), types);
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  ArrayRef<int64_t> in = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (low.size() != in.size() || high.size() != in.size())
    return error() << "low " << formatShape(low) << " and high " << formatShape(high)
                   << " must each have one entry per dimension of " << formatShape(in);
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < in.size(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return error() << "padding of dimension " << d << " must be non-negative, got ["
                     << low[d] << ", " << high[d] << "]";
    int64_t size;
    if (llvm::AddOverflow(low[d], in[d], size) || llvm::AddOverflow(size, high[d], size))
      return error() << "padding of dimension " << d << " is too large";
    shape.push_back(size);
  }
  return pushFloatTensor(error, adaptor.getInput(), shape, types);
}

LogicalResult BroadcastOp::verify() {
  ArrayRef<int64_t> in = getInput().getType().getShape(), out = getType().getShape();
  std::optional<SmallVector<int64_t>> shape = broadcastShapes(in, out);
  if (!shape || ArrayRef<int64_t>(*shape) != out)
    return emitOpError() << "cannot broadcast " << formatShape(in) << " to " << formatShape(out);
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError() << "cannot change the element type from "
                         << getInput().getType().getElementType() << " to "
                         << getType().getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

std::string sbpc::graph::hyperparameterProblem(StringRef name, double value) {
  // lr and weight_decay: non-negative; eps: positive; the momenta: in [0, 1).
  bool unit = name == "momentum" || name == "beta1" || name == "beta2";
  bool positive = name == "eps";
  bool ok = std::isfinite(value) && (unit       ? value >= 0.0 && value < 1.0
                                     : positive ? value > 0.0
                                                : value >= 0.0);
  if (ok)
    return "";
  std::ostringstream text;
  text << "must be " << (unit ? "in [0, 1)" : positive ? "positive" : "non-negative")
       << (unit ? "" : " and finite") << ", got " << value;
  return text.str();
}

/// Checks every hyperparameter against its range; names the first that is out.
static LogicalResult checkHyperparameters(const ShapeError &error,
                                          ArrayRef<std::pair<StringRef, APFloat>> values) {
  for (const auto &[name, value] : values)
    if (std::string problem = hyperparameterProblem(name, value.convertToDouble());
        !problem.empty())
      return error() << name << " " << problem;
  return success();
}

LogicalResult SgdUpdateOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  if (failed(checkSameShape(error, "param", adaptor.getParam(),
                            {{"grad", adaptor.getGrad()}, {"velocity", adaptor.getVelocity()}})) ||
      failed(checkHyperparameters(
          error, {{"lr", adaptor.getLr()},
                  {"momentum", adaptor.getMomentum()},
                  {"weight_decay", adaptor.getWeightDecay()}})))
    return failure();
  types.append(2, adaptor.getParam().getType());
  return success();
}

LogicalResult AdamwUpdateOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ShapeError error{loc, getOperationName()};
  if (failed(checkSameShape(error, "param", adaptor.getParam(),
                            {{"grad", adaptor.getGrad()}, {"m", adaptor.getM()},
                             {"v", adaptor.getV()}})) ||
      failed(checkHyperparameters(
          error, {{"lr", adaptor.getLr()},
                  {"beta1", adaptor.getBeta1()},
                  {"beta2", adaptor.getBeta2()},
                  {"eps", adaptor.getEps()},
                  {"weight_decay", adaptor.getWeightDecay()}})))
    return failure();
  types.append(3, adaptor.getParam().getType());
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Graph/IR/GraphOps.cpp.inc"
