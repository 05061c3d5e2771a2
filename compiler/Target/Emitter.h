// The emitters: exec programs as C++ calling libsbprt (CPU) or as CUDA C++
// calling libsbprt_cuda (GPU). Both write the same calls, one per op, with
// the same arguments; only the namespace of the kernels, the arena's memory
// and the includes differ.
#pragma once

#include "runtime/Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <ostream>
#include <string>

namespace sbpc {

enum class TargetKind { Cpu, Cuda };

/// "cpu" or "cuda".
const char *targetName(TargetKind kind);

/// Writes `program` (an exec program after --exec-plan-memory, on `mesh`)
/// as a translation unit (.cpp for the CPU, .cu for CUDA) whose main runs it
/// as one rank; `name` names the program in comments and in what the rank
/// reports.
mlir::LogicalResult emitProgram(mlir::func::FuncOp program, const sbprt::Mesh &mesh,
                                const std::string &name, TargetKind target, std::ostream &out);

} // namespace sbpc
