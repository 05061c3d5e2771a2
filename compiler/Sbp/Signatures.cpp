// nd signatures from 1-D rules.
//
// Mesh axis 0 splits first, as in sbprt::blockOf. For each axis the op's 1-D
// rules are asked with the local shapes left by the outer axes; a rule's
// splits must divide those shapes by the axis size. The product over axes is
// explored depth first; ops have few 1-D signatures (under a dozen) and
// meshes few axes, so the product stays small.
#include "compiler/Sbp/Signatures.h"

#include "mlir/IR/BuiltinTypes.h"

#include <functional>

using namespace mlir;
using sbpc::sbp::Shape;
using sbpc::sbp::Signature;

namespace sbpc {
namespace {

std::vector<Shape> shapesOf(TypeRange types) {
  std::vector<Shape> shapes;
  for (Type t : types) {
    auto ranked = cast<RankedTensorType>(t);
    shapes.emplace_back(ranked.getShape().begin(), ranked.getShape().end());
  }
  return shapes;
}

/// Whether every split of `sig` divides its value's shape by `parts`.
bool divides(const Signature &sig, const std::vector<Shape> &operands,
             const std::vector<Shape> &results, int64_t parts) {
  auto ok = [&](const sbprt::Sbp &s, const Shape &shape) {
    return !s.isSplit() || (s.dim < static_cast<int64_t>(shape.size()) && shape[s.dim] % parts == 0);
  };
  for (size_t i = 0; i < operands.size(); ++i)
    if (!ok(sig.operands[i], operands[i]))
      return false;
  for (size_t i = 0; i < results.size(); ++i)
    if (!ok(sig.results[i], results[i]))
      return false;
  return true;
}

void divideShapes(std::vector<Shape> &shapes, llvm::ArrayRef<sbprt::Sbp> sbps, int64_t parts) {
  for (size_t i = 0; i < shapes.size(); ++i)
    if (sbps[i].isSplit())
      shapes[i][sbps[i].dim] /= parts;
}

/// Whether a signature gives a partial layout to an integer value.
bool partialInteger(const NdSignature &sig, Operation *op) {
  auto bad = [](Value v, const sbprt::NdSbp &layout) {
    return !isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()) &&
           llvm::any_of(layout, [](const sbprt::Sbp &s) { return s.isPartial(); });
  };
  for (auto [v, layout] : llvm::zip(op->getOperands(), sig.operands))
    if (bad(v, layout))
      return true;
  for (auto [v, layout] : llvm::zip(op->getResults(), sig.results))
    if (bad(v, layout))
      return true;
  return false;
}

bool mixesPartials(const std::vector<sbprt::NdSbp> &layouts) {
  return llvm::any_of(layouts, [](const sbprt::NdSbp &l) { return sbprt::mixesPartials(l); });
}

} // namespace

std::vector<NdSignature> ndSignatures(Operation *op, const sbprt::Mesh &mesh) {
  auto sbpOp = dyn_cast<sbp::SbpOpInterface>(op);
  if (!sbpOp)
    return {};
  std::vector<NdSignature> found;
  NdSignature current{std::vector<sbprt::NdSbp>(op->getNumOperands()),
                      std::vector<sbprt::NdSbp>(op->getNumResults())};
  std::function<void(size_t, const std::vector<Shape> &, const std::vector<Shape> &)> visit =
      [&](size_t axis, const std::vector<Shape> &operands, const std::vector<Shape> &results) {
        if (axis == mesh.shape.size()) {
          if (!mixesPartials(current.operands) && !mixesPartials(current.results) &&
              !partialInteger(current, op))
            found.push_back(current);
          return;
        }
        int64_t parts = mesh.shape[axis];
        SmallVector<Signature> oneDim;
        sbpOp.getSbpSignatures(operands, results, oneDim);
        for (const Signature &sig : oneDim) {
          if (!divides(sig, operands, results, parts))
            continue;
          std::vector<Shape> nextOperands = operands, nextResults = results;
          divideShapes(nextOperands, sig.operands, parts);
          divideShapes(nextResults, sig.results, parts);
          for (size_t i = 0; i < operands.size(); ++i)
            current.operands[i].push_back(sig.operands[i]);
          for (size_t i = 0; i < results.size(); ++i)
            current.results[i].push_back(sig.results[i]);
          visit(axis + 1, nextOperands, nextResults);
          for (sbprt::NdSbp &layout : current.operands)
            layout.pop_back();
          for (sbprt::NdSbp &layout : current.results)
            layout.pop_back();
        }
      };
  visit(0, shapesOf(op->getOperandTypes()), shapesOf(op->getResultTypes()));
  return found;
}

std::vector<int64_t> localShape(const sbprt::Mesh &mesh, const sbprt::NdSbp &layout,
                                std::vector<int64_t> shape) {
  return sbprt::blockOf(mesh, layout, shape, 0).sizes;
}

} // namespace sbpc
