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

static FailureOr<MeshOp> lookupMesh(Operation *op, FlatSymbolRefAttr name,
                                    SymbolTableCollection &symbols) {
  auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(op, name);
  if (!mesh)
    return op->emitOpError() << "'" << name << "' does not name an sbp.mesh";
  return mesh;
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
