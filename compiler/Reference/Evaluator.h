// The reference evaluator: runs a graph-dialect model on one CPU, the
// simplest correct way. Every distributed result is compared against it.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "runtime/Tensor.h"

#include <vector>

namespace sbpc {

/// Evaluates `func` on `arguments` (one tensor per function argument, of the
/// argument's type) and returns one tensor per result. Run-time errors (an
/// index out of range, an unsupported op) are diagnostics at the op.
mlir::FailureOr<std::vector<sbprt::Tensor>> evaluate(mlir::func::FuncOp func,
                                                     std::vector<sbprt::Tensor> arguments);

} // namespace sbpc
