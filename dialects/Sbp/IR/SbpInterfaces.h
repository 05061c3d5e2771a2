// SbpOpInterface: the SBP signatures and costs of an op.
#pragma once

#include "mlir/IR/OpDefinition.h"
#include "runtime/Layout.h"

#include "llvm/ADT/SmallVector.h"

namespace sbpc::sbp {

/// One layout per operand and per result on one mesh axis.
struct Signature {
  llvm::SmallVector<sbprt::Sbp, 4> operands;
  llvm::SmallVector<sbprt::Sbp, 2> results;
};

using Shape = llvm::SmallVector<int64_t, 4>;
using ShapeList = llvm::ArrayRef<Shape>;

} // namespace sbpc::sbp

#include "dialects/Sbp/IR/SbpInterfaces.h.inc"
