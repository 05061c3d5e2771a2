// The CPU target: exec programs as C++ calling libsbprt.
#pragma once

#include "runtime/Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <ostream>
#include <string>

namespace sbpc {

/// Writes `program` (an exec program after --exec-plan-memory, on `mesh`)
/// as a C++ translation unit whose main runs it as one rank; `name` names
/// the program in comments and in what the rank reports.
mlir::LogicalResult emitCpuProgram(mlir::func::FuncOp program, const sbprt::Mesh &mesh,
                                   const std::string &name, std::ostream &out);

} // namespace sbpc
