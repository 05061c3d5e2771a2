// The sbp dialect: registration, mesh and layout verification.
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace sbpc::sbp;

#include "dialects/Sbp/IR/SbpDialect.cpp.inc"

void SbpDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/Sbp/IR/SbpOps.cpp.inc"
      >();
}

LogicalResult SbpDialect::verifyRegionArgAttribute(Operation *op, unsigned regionIndex,
                                                   unsigned argIndex, NamedAttribute attr) {
  if (attr.getName().getValue() == "sbp.layout" && !isa<NdSbpAttr>(attr.getValue()))
    return op->emitOpError() << "argument #" << argIndex
                             << " 'sbp.layout' must be an nd-SBP like #sbp.nd<[S(0), B]>, got "
                             << attr.getValue();
  return success();
}

static FailureOr<MeshOp> lookupMesh(Operation *op, FlatSymbolRefAttr name,
                                    SymbolTableCollection &symbols) {
  auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(op, name);
  if (!mesh)
    return op->emitOpError() << "'" << name << "' does not name an sbp.mesh";
  return mesh;
}

LogicalResult SbpDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  // (The names compiler/Sbp/ValueLayouts.h gives them.)
  if (name == "sbp.operand_layouts" || name == "sbp.result_layouts") {
    bool operands = name == "sbp.operand_layouts";
    size_t count = operands ? op->getNumOperands() : op->getNumResults();
    auto layouts = dyn_cast<ArrayAttr>(attr.getValue());
    if (!layouts || layouts.size() != count ||
        !llvm::all_of(layouts, [](Attribute a) { return isa<NdSbpAttr>(a); }))
      return op->emitOpError() << "'" << name << "' must hold one nd-SBP like #sbp.nd<[S(0), B]> "
                               << "per " << (operands ? "operand" : "result") << " (" << count
                               << "), got " << attr.getValue();
    return success();
  }
  // An integer of at most 64 bits, at least `least`.
  auto integer = [&](int64_t least) -> IntegerAttr {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    return value && value.getValue().getSignificantBits() <= 64 && value.getInt() >= least
               ? value
               : IntegerAttr();
  };
  if (name == "sbp.mesh") { // a function's mesh, which its layouts are on
    auto mesh = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
    if (!mesh)
      return op->emitOpError() << "'sbp.mesh' must name an sbp.mesh like @mesh, got "
                               << attr.getValue();
    SymbolTableCollection symbols;
    return success(succeeded(lookupMesh(op, mesh, symbols)));
  }
  if (name == "sbp.stages") {
    if (!integer(1))
      return op->emitOpError() << "'sbp.stages' must be a positive integer, got "
                               << attr.getValue();
    return success();
  }
  if (name == "sbp.stage") {
    IntegerAttr stage = integer(0);
    if (!stage)
      return op->emitOpError() << "'sbp.stage' must be a stage number (0, 1, ...), got "
                               << attr.getValue();
    Operation *fn = op->getParentOp();
    while (fn && !fn->hasAttr("sbp.stages"))
      fn = fn->getParentOp();
    auto stages = fn ? dyn_cast<IntegerAttr>(fn->getAttr("sbp.stages")) : IntegerAttr();
    if (stages && stage.getInt() >= stages.getInt())
      return op->emitOpError() << "'sbp.stage' " << stage.getInt() << " is not one of its "
                               << "function's " << stages.getInt() << " stages";
    return success();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  std::string problem = sbprt::checkMesh(toMesh());
  if (!problem.empty())
    return emitOpError() << problem;
  return success();
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

sbprt::Mesh MeshOp::toMesh() {
  sbprt::Mesh mesh;
  for (StringRef axis : getAxes().getAsValueRange<StringAttr>())
    mesh.axes.push_back(axis.str());
  mesh.shape.assign(getShape().begin(), getShape().end());
  return mesh;
}

LogicalResult sbpc::sbp::verifyLayout(Operation *op, MeshOp mesh, NdSbpAttr layout,
                                      RankedTensorType type, StringRef role) {
  std::string problem =
      sbprt::checkLayout(mesh.toMesh(), layout.toLayout(),
                         {type.getShape().begin(), type.getShape().end()},
                         isa<FloatType>(type.getElementType()));
  if (problem.empty())
    return success();
  return op->emitOpError() << role << " " << sbprt::toString(layout.toLayout()) << " on mesh @"
                           << mesh.getSymName() << ": " << problem;
}

LogicalResult ConstraintOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<MeshOp> mesh = lookupMesh(*this, getMeshAttr(), symbols);
  if (failed(mesh))
    return failure();
  return verifyLayout(*this, *mesh, getLayout(), getInput().getType(), "layout");
}

LogicalResult BoxingOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<MeshOp> mesh = lookupMesh(*this, getMeshAttr(), symbols);
  if (failed(mesh))
    return failure();
  auto type = getInput().getType();
  if (failed(verifyLayout(*this, *mesh, getFrom(), type, "source layout")) ||
      failed(verifyLayout(*this, *mesh, getTo(), type, "target layout")))
    return failure();
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Sbp/IR/SbpOps.cpp.inc"
