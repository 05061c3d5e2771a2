// The reference evaluator: walks the model function in order and runs each
// op with the runtime's reference CPU kernels. One tensor per SSA value; a
// value is freed after its last use so peak memory stays near the model's.
#include "compiler/Reference/Evaluator.h"

#include "compiler/Model/ModelSignature.h"
#include "compiler/Sbp/IndexPlaces.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "runtime/cpu/Ops.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>
#include <unistd.h>
#include <limits>

using namespace mlir;
using namespace sbpc::graph;
namespace cpu = sbprt::cpu;

namespace {

class Evaluator {
public:
  LogicalResult run(Operation *op);
  llvm::DenseMap<Value, sbprt::Tensor> values;

private:
  const sbprt::Tensor &in(Value v) { return values.find(v)->second; }
  const float *f32(Value v) { return in(v).as<float>(); }
  static cpu::Shape shape(Value v) {
    auto s = cast<RankedTensorType>(v.getType()).getShape();
    return {s.begin(), s.end()};
  }
  /// Where ids the evaluator holds whole come from, for a message.
  static sbprt::IndexPlace wholePlaceOf(Value ids) {
    sbprt::IndexPlace place = sbpc::indexPlaceOf(ids);
    place.block = place.shape;
    return place;
  }
  /// A fresh tensor for `result`, registered as its value.
  sbprt::Tensor &out(Value result) {
    auto type = cast<RankedTensorType>(result.getType());
    sbprt::Tensor tensor(*sbpc::toDType(type.getElementType()),
                         {type.getShape().begin(), type.getShape().end()});
    return values[result] = std::move(tensor);
  }
  float *outF32(Value result) { return out(result).as<float>(); }

  LogicalResult unary(Operation *op, cpu::UnaryKind kind) {
    Value x = op->getOperand(0);
    cpu::unary(kind, f32(x), outF32(op->getResult(0)), in(x).numElements());
    return success();
  }
  LogicalResult binary(Operation *op, cpu::BinaryKind kind) {
    Value l = op->getOperand(0), r = op->getOperand(1), y = op->getResult(0);
    cpu::binary(kind, f32(l), shape(l), f32(r), shape(r), outF32(y), shape(y));
    return success();
  }
  LogicalResult reduce(Operation *op, cpu::ReduceKind kind, ArrayRef<int64_t> dims) {
    Value x = op->getOperand(0);
    cpu::reduce(kind, f32(x), shape(x), {dims.begin(), dims.end()}, outF32(op->getResult(0)));
    return success();
  }
  LogicalResult constant(ConstantOp op);
  LogicalResult matmul(MatmulOp op);
};

} // namespace

LogicalResult Evaluator::constant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError() << "the reference evaluator supports dense constants only";
  sbprt::Tensor &t = out(op.getResult());
  if (dense.getElementType().isF32())
    llvm::copy(dense.getValues<float>(), t.as<float>());
  else
    llvm::copy(dense.getValues<int64_t>(), t.as<int64_t>());
  return success();
}

LogicalResult Evaluator::matmul(MatmulOp op) {
  cpu::matmulOp(f32(op.getLhs()), shape(op.getLhs()), f32(op.getRhs()), shape(op.getRhs()),
                outF32(op.getResult()), shape(op.getResult()), op.getTransposeLhs(),
                op.getTransposeRhs());
  return success();
}

LogicalResult Evaluator::run(Operation *op) {
  using UK = cpu::UnaryKind;
  using BK = cpu::BinaryKind;
  using RK = cpu::ReduceKind;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp o) { return constant(o); })
      .Case([&](NegOp o) { return unary(o, UK::Neg); })
      .Case([&](ExpOp o) { return unary(o, UK::Exp); })
      .Case([&](LogOp o) { return unary(o, UK::Log); })
      .Case([&](TanhOp o) { return unary(o, UK::Tanh); })
      .Case([&](SqrtOp o) { return unary(o, UK::Sqrt); })
      .Case([&](RsqrtOp o) { return unary(o, UK::Rsqrt); })
      .Case([&](ReluOp o) { return unary(o, UK::Relu); })
      .Case([&](GeluOp o) { return unary(o, UK::Gelu); })
      .Case([&](AddOp o) { return binary(o, BK::Add); })
      .Case([&](SubOp o) { return binary(o, BK::Sub); })
      .Case([&](MulOp o) { return binary(o, BK::Mul); })
      .Case([&](DivOp o) { return binary(o, BK::Div); })
      .Case([&](MatmulOp o) { return matmul(o); })
      .Case([&](ReduceSumOp o) { return reduce(o, RK::Sum, o.getDims()); })
      .Case([&](ReduceMeanOp o) { return reduce(o, RK::Mean, o.getDims()); })
      .Case([&](ReduceMaxOp o) { return reduce(o, RK::Max, o.getDims()); })
      .Case([&](SoftmaxOp o) {
        cpu::softmax(f32(o.getInput()), outF32(o), shape(o), o.getAxis(), false);
        return success();
      })
      .Case([&](LogSoftmaxOp o) {
        cpu::softmax(f32(o.getInput()), outF32(o), shape(o), o.getAxis(), true);
        return success();
      })
      .Case([&](LayerNormOp o) {
        cpu::layerNormOp(f32(o.getInput()), f32(o.getScale()), f32(o.getBias()), outF32(o), shape(o),
                         static_cast<float>(o.getEps().convertToDouble()));
        return success();
      })
      .Case([&](TransposeOp o) {
        cpu::transpose(f32(o.getInput()), shape(o.getInput()), {o.getPerm().begin(), o.getPerm().end()},
                       outF32(o));
        return success();
      })
      .Case([&](ReshapeOp o) {
        sbprt::Tensor &y = out(o); // first: inserting may move the input
        const sbprt::Tensor &x = in(o.getInput());
        std::memcpy(y.data(), x.data(), x.numBytes());
        return success();
      })
      .Case([&](SliceOp o) {
        sbprt::Tensor &y = out(o); // first: inserting may move the input
        const sbprt::Tensor &x = in(o.getInput());
        cpu::slice(x.data(), sbprt::dtypeSize(x.dtype()), shape(o.getInput()),
                   {o.getStarts().begin(), o.getStarts().end()},
                   {o.getLimits().begin(), o.getLimits().end()}, y.data());
        return success();
      })
      .Case([&](ConcatOp o) {
        std::vector<const void *> inputs;
        std::vector<cpu::Shape> shapes;
        for (Value v : o.getInputs()) {
          inputs.push_back(f32(v));
          shapes.push_back(shape(v));
        }
        cpu::concat(inputs, sizeof(float), shapes, o.getAxis(), outF32(o));
        return success();
      })
      .Case([&](EmbeddingOp o) -> LogicalResult {
        std::string error;
        if (!cpu::embeddingOp(f32(o.getTable()), shape(o.getTable()), in(o.getIndices()).as<int64_t>(),
                              in(o.getIndices()).numElements(), outF32(o),
                              wholePlaceOf(o.getIndices()), error))
          return o.emitError() << "embedding: " << error;
        return success();
      })
      .Case([&](CausalMaskOp o) {
        cpu::causalMaskOp(f32(o.getInput()), outF32(o), shape(o),
                          -std::numeric_limits<float>::infinity());
        return success();
      })
      .Case([&](CausalMaskGradOp o) {
        cpu::causalMaskOp(f32(o.getGrad()), outF32(o), shape(o), 0.0f);
        return success();
      })
      .Case([&](ReluGradOp o) {
        cpu::reluGrad(f32(o.getInput()), f32(o.getGrad()), outF32(o), in(o.getInput()).numElements());
        return success();
      })
      .Case([&](GeluGradOp o) {
        cpu::geluGrad(f32(o.getInput()), f32(o.getGrad()), outF32(o), in(o.getInput()).numElements());
        return success();
      })
      .Case([&](SoftmaxGradOp o) {
        cpu::softmaxGrad(f32(o.getOutput()), f32(o.getGrad()), outF32(o), shape(o), o.getAxis());
        return success();
      })
      .Case([&](LayerNormGradOp o) {
        cpu::layerNormGradOp(f32(o.getInput()), f32(o.getScale()), f32(o.getGrad()),
                             outF32(o.getInputGrad()), outF32(o.getScaleGrad()),
                             outF32(o.getBiasGrad()), shape(o.getInput()),
                             static_cast<float>(o.getEps().convertToDouble()));
        return success();
      })
      .Case([&](EmbeddingGradOp o) -> LogicalResult {
        std::string error;
        if (!cpu::embeddingGradOp(in(o.getIndices()).as<int64_t>(), in(o.getIndices()).numElements(),
                                  f32(o.getGrad()), shape(o), outF32(o),
                                  wholePlaceOf(o.getIndices()), error))
          return o.emitError() << "embedding_grad: " << error;
        return success();
      })
      .Case([&](CrossEntropyGradOp o) -> LogicalResult {
        std::string error;
        if (!cpu::crossEntropyGradOp(f32(o.getLogits()), shape(o.getLogits()),
                                     in(o.getTargets()).as<int64_t>(), f32(o.getLossGrad()),
                                     outF32(o), wholePlaceOf(o.getTargets()), error))
          return o.emitError() << "cross_entropy_grad: " << error;
        return success();
      })
      .Case([&](PadOp o) {
        cpu::pad(f32(o.getInput()), shape(o.getInput()), {o.getLow().begin(), o.getLow().end()},
                 {o.getHigh().begin(), o.getHigh().end()}, outF32(o));
        return success();
      })
      .Case([&](BroadcastOp o) {
        cpu::broadcast(f32(o.getInput()), shape(o.getInput()), outF32(o), shape(o));
        return success();
      })
      .Case([&](SgdUpdateOp o) {
        cpu::sgdUpdate(f32(o.getParam()), f32(o.getGrad()), f32(o.getVelocity()),
                       in(o.getParam()).numElements(), o.getLr().convertToDouble(),
                       o.getMomentum().convertToDouble(), o.getWeightDecay().convertToDouble(),
                       outF32(o.getNewParam()), outF32(o.getNewVelocity()));
        return success();
      })
      .Case([&](AdamwUpdateOp o) {
        cpu::adamwUpdate(f32(o.getParam()), f32(o.getGrad()), f32(o.getM()), f32(o.getV()),
                         in(o.getParam()).numElements(), *f32(o.getStep()),
                         o.getLr().convertToDouble(), o.getBeta1().convertToDouble(),
                         o.getBeta2().convertToDouble(), o.getEps().convertToDouble(),
                         o.getWeightDecay().convertToDouble(), outF32(o.getNewParam()),
                         outF32(o.getNewM()), outF32(o.getNewV()));
        return success();
      })
      .Case([&](CrossEntropyOp o) -> LogicalResult {
        std::string error;
        if (!cpu::crossEntropyOp(f32(o.getLogits()), shape(o.getLogits()),
                                 in(o.getTargets()).as<int64_t>(), outF32(o),
                                 wholePlaceOf(o.getTargets()), error))
          return o.emitError() << "cross_entropy: " << error;
        return success();
      })
      // A layout never changes a tensor's (global) value.
      .Case<sbpc::sbp::ConstraintOp, sbpc::sbp::BoxingOp>([&](Operation *o) {
        sbprt::Tensor value = in(o->getOperand(0)); // copy: out() may rehash the map
        out(o->getResult(0)) = std::move(value);
        return success();
      })
      .Default([](Operation *other) {
        return other->emitOpError() << "is not supported by the reference evaluator";
      });
}

/// Fails at `op` when its results would not fit beside the live values in
/// this machine's memory: a clear error instead of an out-of-memory abort.
static LogicalResult checkMemory(Operation *op,
                                 const llvm::DenseMap<Value, sbprt::Tensor> &live) {
  static const double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  double needed = 0;
  for (Value result : op->getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    needed += static_cast<double>(type.getNumElements()) *
              static_cast<double>(type.getElementTypeBitWidth() / 8);
  }
  double held = 0;
  for (const auto &entry : live)
    held += static_cast<double>(entry.second.numBytes());
  if (needed + held <= physical)
    return success();
  auto gb = [](double bytes) { return llvm::formatv("{0:f1} GB", bytes / 1e9).str(); };
  return op->emitError() << "the reference evaluator needs " << gb(needed)
                         << " for this op's results beside " << gb(held)
                         << " of live values, more than this machine's " << gb(physical);
}

FailureOr<std::vector<sbprt::Tensor>> sbpc::evaluate(func::FuncOp func,
                                                     std::vector<sbprt::Tensor> arguments) {
  Evaluator eval;
  // Room for every value up front: an insertion never moves a tensor that an
  // op is reading.
  unsigned valueCount = func.getNumArguments();
  func.walk([&](Operation *op) { valueCount += op->getNumResults(); });
  eval.values.reserve(valueCount);
  for (auto [arg, value] : llvm::zip(func.getArguments(), arguments))
    eval.values[arg] = std::move(value);
  // Free every value after the op that uses it last (values returned are used by the return).
  llvm::DenseMap<Operation *, SmallVector<Value>> dying;
  auto noteLastUse = [&](Value v) {
    Operation *last = nullptr;
    for (Operation *user : v.getUsers())
      if (!last || last->isBeforeInBlock(user))
        last = user;
    if (last)
      dying[last].push_back(v);
  };
  for (Value arg : func.getArguments())
    noteLastUse(arg);
  func.walk([&](Operation *op) {
    for (Value result : op->getResults())
      noteLastUse(result);
  });

  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<sbprt::Tensor> results;
      for (Value v : ret.getOperands())
        results.push_back(eval.values.find(v)->second);
      return results;
    }
    if (failed(checkMemory(&op, eval.values)))
      return failure();
    if (failed(eval.run(&op)))
      return failure();
    for (Value v : dying.lookup(&op))
      eval.values.erase(v);
  }
  return func.emitError() << "model function has no return";
}
