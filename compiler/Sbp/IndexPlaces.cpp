#include "compiler/Sbp/IndexPlaces.h"

#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace sbpc {

namespace {

std::vector<int64_t> shapeOf(Value value) {
  auto shape = cast<ShapedType>(value.getType()).getShape();
  return {shape.begin(), shape.end()};
}

} // namespace

OpOperand *idsOperandOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, OpOperand *>(op)
      .Case<graph::EmbeddingOp, graph::EmbeddingGradOp>(
          [](auto o) { return &o.getIndicesMutable(); })
      .Case<graph::CrossEntropyOp, graph::CrossEntropyGradOp>(
          [](auto o) { return &o.getTargetsMutable(); })
      .Default([](Operation *) { return nullptr; });
}

sbprt::IndexPlace indexPlaceOf(Value ids) {
  sbprt::IndexPlace place;
  place.shape = shapeOf(ids);
  Value value = ids;
  for (;;) {
    Operation *def = value.getDefiningOp();
    if (!def)
      break;
    if (isa<graph::ReshapeOp, sbp::BoxingOp>(def)) {
      value = def->getOperand(0);
    } else if (auto slice = dyn_cast<graph::SliceOp>(def)) {
      place.slices.push_back({shapeOf(slice.getResult()), shapeOf(slice.getInput()),
                              std::vector<int64_t>(slice.getStarts().begin(),
                                                   slice.getStarts().end())});
      value = slice.getInput();
    } else {
      break;
    }
  }
  auto arg = dyn_cast<BlockArgument>(value);
  auto fn = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
  auto name = fn ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   graph::GraphDialect::kInputAttr)
                 : StringAttr();
  if (!name) {
    // Computed ids: their own positions are all there is to say.
    place.slices.clear();
    return place;
  }
  place.originShape = shapeOf(value);
  place.origin = "input '" + name.getValue().str() + "'";
  return place;
}

} // namespace sbpc
