// The 1-D SBP rules of the graph ops (SbpOpInterface external models).
//
// A rule may list a signature only if running the same op on each device's
// local operands (with sizes in attributes made local, see
// cloneWithLocalShapes) yields that device's local results; test/unit's
// signature test checks every listed signature numerically on a simulated
// mesh.
// Partial sums pass through ops linear in that operand; partial maxima pass
// through ops monotone over all reals (exp, tanh, relu) and through data
// movement.
#include "compiler/Sbp/Signatures.h"

#include "dialects/Graph/IR/GraphOps.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace sbpc::graph;
using sbpc::sbp::Shape;
using sbpc::sbp::ShapeList;
using sbpc::sbp::Signature;
using sbprt::Sbp;

namespace {

const Sbp B = Sbp::broadcast();
const Sbp Psum = Sbp::partial(Sbp::Reduce::Sum);
const Sbp Pmax = Sbp::partial(Sbp::Reduce::Max);
Sbp S(int64_t dim) { return Sbp::split(dim); }

/// Collects signatures.
struct Rules {
  SmallVectorImpl<Signature> &out;
  void add(std::initializer_list<Sbp> operands, std::initializer_list<Sbp> results) {
    out.push_back({SmallVector<Sbp, 4>(operands), SmallVector<Sbp, 2>(results)});
  }
  /// The same layout for every operand and every result.
  void uniform(size_t operands, size_t results, Sbp sbp) {
    out.push_back({SmallVector<Sbp, 4>(operands, sbp), SmallVector<Sbp, 2>(results, sbp)});
  }
};

int64_t rankOf(const Shape &s) { return static_cast<int64_t>(s.size()); }
double count(const Shape &s) { return static_cast<double>(sbprt::numElements({s.begin(), s.end()})); }

/// Elementwise ops on same-shaped operands: split any dimension, or
/// broadcast; `linear` adds P(sum) -> P(sum), `monotone` P(max) -> P(max).
void elementwise(const Shape &shape, size_t operands, size_t results, bool linear, bool monotone,
                 Rules r) {
  r.uniform(operands, results, B);
  for (int64_t d = 0; d < rankOf(shape); ++d)
    r.uniform(operands, results, S(d));
  if (linear)
    r.uniform(operands, results, Psum);
  if (monotone)
    r.uniform(operands, results, Pmax);
}

/// How an operand of `shape` is laid out when a broadcast result of
/// `result` is split along `dim`: split too where it has that dimension,
/// broadcast where NumPy stretches it.
Sbp broadcastOperand(const Shape &shape, const Shape &result, int64_t dim) {
  int64_t d = dim - (rankOf(result) - rankOf(shape));
  return d >= 0 && shape[d] == result[dim] ? S(d) : B;
}

/// `maxLeft`/`maxRight`: a partial maximum shifted by a broadcast value is
/// still a partial maximum (x - max(x) in a vocabulary-parallel softmax).
void broadcastBinary(ShapeList in, const Shape &out, bool sumBoth, bool sumLeft, bool sumRight,
                     bool maxLeft, bool maxRight, Rules r) {
  r.add({B, B}, {B});
  for (int64_t e = 0; e < rankOf(out); ++e)
    r.add({broadcastOperand(in[0], out, e), broadcastOperand(in[1], out, e)}, {S(e)});
  if (sumBoth)
    r.add({Psum, Psum}, {Psum});
  if (sumLeft)
    r.add({Psum, B}, {Psum});
  if (sumRight)
    r.add({B, Psum}, {Psum});
  if (maxLeft)
    r.add({Pmax, B}, {Pmax});
  if (maxRight)
    r.add({B, Pmax}, {Pmax});
}

void matmul(MatmulOp op, ShapeList in, Rules r) {
  int64_t rank = rankOf(in[0]), batch = rank - 2;
  bool sharedRhs = rankOf(in[1]) == 2;
  int64_t rb = rankOf(in[1]) - 2;
  int64_t lhsM = batch + (op.getTransposeLhs() ? 1 : 0), lhsK = batch + (op.getTransposeLhs() ? 0 : 1);
  int64_t rhsK = rb + (op.getTransposeRhs() ? 1 : 0), rhsN = rb + (op.getTransposeRhs() ? 0 : 1);
  r.add({B, B}, {B});
  for (int64_t b = 0; b < batch; ++b)
    r.add({S(b), sharedRhs ? B : S(b)}, {S(b)});
  r.add({S(lhsM), B}, {S(batch)});
  r.add({B, S(rhsN)}, {S(batch + 1)});
  r.add({S(lhsK), S(rhsK)}, {Psum});
  r.add({Psum, B}, {Psum});
  r.add({B, Psum}, {Psum});
}

/// Reductions: kept dimensions stay split; a split reduced dimension leaves
/// a partial of the reduction's kind (sum or max), or is not allowed (mean).
void reduction(ArrayRef<int64_t> dims, bool keepdims, const Shape &in,
               std::optional<Sbp> reducedSplit, std::optional<Sbp> partialThrough, Rules r) {
  r.add({B}, {B});
  for (int64_t d = 0; d < rankOf(in); ++d) {
    bool reduced = llvm::is_contained(dims, d);
    int64_t before = llvm::count_if(dims, [&](int64_t x) { return x < d; });
    if (!reduced)
      r.add({S(d)}, {S(keepdims ? d : d - before)});
    else if (reducedSplit)
      r.add({S(d)}, {*reducedSplit});
  }
  if (partialThrough)
    r.add({*partialThrough}, {*partialThrough});
}

/// Splits of every dimension but `except` (the axis a row-wise op works along).
void splitsExcept(const Shape &shape, std::optional<int64_t> except, size_t operands,
                  size_t results, Rules r) {
  for (int64_t d = 0; d < rankOf(shape); ++d)
    if (d != except)
      r.uniform(operands, results, S(d));
}

/// Reshape: a split passes when the dimensions before it hold as many
/// elements in the input as before some output dimension (the shards stay
/// whole rows of the new shape); divisibility is checked by the caller.
void reshape(const Shape &in, const Shape &out, Rules r) {
  r.add({B}, {B});
  r.add({Psum}, {Psum});
  r.add({Pmax}, {Pmax});
  int64_t inPrefix = 1;
  for (int64_t d = 0; d < rankOf(in); inPrefix *= in[d], ++d) {
    int64_t outPrefix = 1;
    for (int64_t e = 0; e < rankOf(out) && outPrefix <= inPrefix; outPrefix *= out[e], ++e)
      if (outPrefix == inPrefix && out[e] > 1) {
        r.add({S(d)}, {S(e)});
        break;
      }
  }
}

void rulesFor(Operation *op, ShapeList in, ShapeList out, Rules r) {
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](ConstantOp) { r.add({}, {B}); })
      .Case<NegOp>([&](auto) { elementwise(out[0], 1, 1, true, false, r); })
      .Case<ExpOp, TanhOp, ReluOp>([&](auto) { elementwise(out[0], 1, 1, false, true, r); })
      .Case<LogOp, SqrtOp, RsqrtOp, GeluOp>(
          [&](auto) { elementwise(out[0], 1, 1, false, false, r); })
      .Case([&](AddOp) { broadcastBinary(in, out[0], true, false, false, true, true, r); })
      .Case([&](SubOp) { broadcastBinary(in, out[0], true, false, false, true, false, r); })
      .Case([&](MulOp) { broadcastBinary(in, out[0], false, true, true, false, false, r); })
      .Case([&](DivOp) { broadcastBinary(in, out[0], false, true, false, false, false, r); })
      .Case([&](MatmulOp o) { matmul(o, in, r); })
      .Case([&](ReduceSumOp o) { reduction(o.getDims(), o.getKeepdims(), in[0], Psum, Psum, r); })
      .Case([&](ReduceMeanOp o) {
        reduction(o.getDims(), o.getKeepdims(), in[0], std::nullopt, Psum, r);
      })
      .Case([&](ReduceMaxOp o) { reduction(o.getDims(), o.getKeepdims(), in[0], Pmax, Pmax, r); })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto o) {
        r.add({B}, {B});
        splitsExcept(in[0], o.getAxis(), 1, 1, r);
      })
      .Case([&](LayerNormOp) {
        r.add({B, B, B}, {B});
        for (int64_t d = 0; d + 1 < rankOf(in[0]); ++d)
          r.add({S(d), B, B}, {S(d)});
      })
      .Case([&](TransposeOp o) {
        r.add({B}, {B});
        r.add({Psum}, {Psum});
        r.add({Pmax}, {Pmax});
        for (auto [i, p] : llvm::enumerate(o.getPerm()))
          r.add({S(p)}, {S(static_cast<int64_t>(i))});
      })
      .Case([&](ReshapeOp) { reshape(in[0], out[0], r); })
      .Case([&](SliceOp o) {
        r.add({B}, {B});
        r.add({Psum}, {Psum});
        r.add({Pmax}, {Pmax});
        for (int64_t d = 0; d < rankOf(in[0]); ++d)
          if (o.getStarts()[d] == 0 && o.getLimits()[d] == in[0][d])
            r.add({S(d)}, {S(d)});
      })
      .Case([&](ConcatOp o) {
        size_t n = in.size();
        r.uniform(n, 1, B);
        r.uniform(n, 1, Psum);
        r.uniform(n, 1, Pmax);
        splitsExcept(out[0], o.getAxis(), n, 1, r);
      })
      .Case([&](EmbeddingOp) {
        r.add({B, B}, {B});
        for (int64_t d = 0; d < rankOf(in[1]); ++d)
          r.add({B, S(d)}, {S(d)});
        r.add({S(1), B}, {S(rankOf(in[1]))});
        r.add({Psum, B}, {Psum});
      })
      .Case<CausalMaskOp, CausalMaskGradOp>([&](auto) {
        r.add({B}, {B});
        r.add({Psum}, {Psum});
        r.add({Pmax}, {Pmax});
        for (int64_t d = 0; d + 2 < rankOf(in[0]); ++d)
          r.add({S(d)}, {S(d)});
      })
      .Case([&](CrossEntropyOp) {
        r.add({B, B}, {B});
        for (int64_t d = 0; d + 1 < rankOf(in[0]); ++d)
          r.add({S(d), S(d)}, {Psum});
      })
      .Case<ReluGradOp, GeluGradOp>([&](auto) {
        elementwise(out[0], 2, 1, false, false, r);
        r.add({B, Psum}, {Psum});
      })
      .Case([&](SoftmaxGradOp o) {
        r.add({B, B}, {B});
        splitsExcept(in[0], o.getAxis(), 2, 1, r);
        r.add({B, Psum}, {Psum});
      })
      .Case([&](LayerNormGradOp) {
        r.add({B, B, B}, {B, B, B});
        for (int64_t d = 0; d + 1 < rankOf(in[0]); ++d)
          r.add({S(d), B, S(d)}, {S(d), Psum, Psum});
        r.add({B, B, Psum}, {Psum, Psum, Psum});
      })
      .Case([&](EmbeddingGradOp) {
        r.add({B, B}, {B});
        for (int64_t d = 0; d < rankOf(in[0]); ++d)
          r.add({S(d), S(d)}, {Psum});
        r.add({B, S(rankOf(in[0]))}, {S(1)});
        r.add({B, Psum}, {Psum});
      })
      .Case([&](CrossEntropyGradOp) {
        r.add({B, B, B}, {B});
        for (int64_t d = 0; d + 1 < rankOf(in[0]); ++d)
          r.add({S(d), S(d), B}, {S(d)});
        r.add({B, B, Psum}, {Psum});
      })
      .Case([&](PadOp o) {
        r.add({B}, {B});
        r.add({Psum}, {Psum});
        for (int64_t d = 0; d < rankOf(in[0]); ++d)
          if (o.getLow()[d] == 0 && o.getHigh()[d] == 0)
            r.add({S(d)}, {S(d)});
      })
      .Case([&](BroadcastOp) {
        r.add({B}, {B});
        r.add({Psum}, {Psum});
        for (int64_t e = 0; e < rankOf(out[0]); ++e) {
          Sbp operand = broadcastOperand(in[0], out[0], e);
          if (operand.isSplit())
            r.add({operand}, {S(e)});
        }
      })
      .Case([&](SgdUpdateOp) { elementwise(out[0], 3, 2, false, false, r); })
      .Case([&](AdamwUpdateOp) {
        r.add({B, B, B, B, B}, {B, B, B});
        for (int64_t d = 0; d < rankOf(in[0]); ++d)
          r.add({S(d), S(d), S(d), S(d), B}, {S(d), S(d), S(d)});
      });
}

/// Rough FLOP counts: enough to rank plans, not to predict kernels.
double flopsFor(Operation *op, ShapeList in, ShapeList out) {
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case([&](MatmulOp o) {
        int64_t k = in[0][rankOf(in[0]) - (o.getTransposeLhs() ? 2 : 1)];
        return 2.0 * count(out[0]) * static_cast<double>(k);
      })
      .Case<SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, CrossEntropyOp, CrossEntropyGradOp>(
          [&](auto) { return 5.0 * count(in[0]); })
      .Case<LayerNormOp, LayerNormGradOp>([&](auto) { return 8.0 * count(in[0]); })
      .Case<GeluOp, GeluGradOp, AdamwUpdateOp>([&](auto) { return 10.0 * count(in[0]); })
      .Case<ReshapeOp, TransposeOp, SliceOp, ConcatOp, EmbeddingOp, PadOp, BroadcastOp,
            ConstantOp>([&](auto) { return 0.0; })
      .Default([&](Operation *) { return out.empty() ? 0.0 : count(out[0]); });
}

struct GraphSbpModel : sbpc::sbp::SbpOpInterface::FallbackModel<GraphSbpModel> {
  void getSbpSignatures(Operation *op, ShapeList operands, ShapeList results,
                        SmallVectorImpl<Signature> &signatures) const {
    rulesFor(op, operands, results, Rules{signatures});
  }
  double getFlops(Operation *op, ShapeList operands, ShapeList results) const {
    return flopsFor(op, operands, results);
  }
};

template <typename... Ops> void attachAll(MLIRContext *ctx) {
  (Ops::template attachInterface<GraphSbpModel>(*ctx), ...);
}

} // namespace

Operation *sbpc::cloneWithLocalShapes(OpBuilder &b, Operation *op, IRMapping &operands,
                                      TypeRange resultTypes) {
  Operation *local = b.clone(*op, operands);
  for (auto [result, type] : llvm::zip(local->getResults(), resultTypes))
    result.setType(type);
  if (auto slice = dyn_cast<SliceOp>(local)) {
    // A dimension kept whole stays whole: its limit is the local size.
    ArrayRef<int64_t> global = cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    ArrayRef<int64_t> shape = slice.getInput().getType().getShape();
    SmallVector<int64_t> limits(slice.getLimits());
    for (size_t d = 0; d < limits.size(); ++d)
      if (slice.getStarts()[d] == 0 && limits[d] == global[d])
        limits[d] = shape[d];
    slice.setLimits(limits);
  }
  return local;
}

void sbpc::registerGraphSbpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, GraphDialect *) {
    attachAll<
#define GET_OP_LIST
#include "dialects/Graph/IR/GraphOps.cpp.inc"
        >(ctx);
  });
}
