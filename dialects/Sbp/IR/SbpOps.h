// Operations of the sbp dialect.
#pragma once

#include "dialects/Sbp/IR/SbpAttrs.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/Sbp/IR/SbpOps.h.inc"

namespace sbpc::sbp {

/// Checks that `layout` can describe a tensor of `type` on `mesh`: one entry
/// per mesh axis, split dimensions in range, and every split dimension
/// divisible by the product of the mesh axes that split it. `role` names the
/// layout in diagnostics ("layout", "source layout", ...).
mlir::LogicalResult verifyLayout(mlir::Operation *op, MeshOp mesh, NdSbpAttr layout,
                                 mlir::RankedTensorType type, llvm::StringRef role);

} // namespace sbpc::sbp
