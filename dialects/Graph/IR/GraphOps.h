// Operations of the graph dialect.
#pragma once

#include "dialects/Graph/IR/GraphDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/Graph/IR/GraphOps.h.inc"

namespace sbpc::graph {

/// The NumPy broadcast of two shapes, or std::nullopt when they do not broadcast.
std::optional<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                                                          llvm::ArrayRef<int64_t> rhs);

/// "[2, 16, 64]": how shapes appear in every diagnostic.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

} // namespace sbpc::graph
