// The exec dialect: one rank's program.
#pragma once

#include "dialects/Sbp/IR/SbpAttrs.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Exec/IR/ExecDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Exec/IR/ExecOps.h.inc"

namespace sbpc::exec {

/// Function attributes of an exec program: the ranks that run it, and after
/// --exec-plan-memory the size of its arena.
constexpr llvm::StringLiteral kProgramRanks = "exec.ranks";
constexpr llvm::StringLiteral kArenaBytes = "exec.arena_bytes";
/// Op attributes set by --exec-plan-memory: the arena offset of each result,
/// and of the scratch memory a collective needs.
constexpr llvm::StringLiteral kOffsets = "exec.offsets";
constexpr llvm::StringLiteral kScratchOffset = "exec.scratch_offset";

/// Whether `fn` is an exec program (spmdized).
bool isProgram(mlir::Operation *fn);

/// "sum" or "max" as the runtime's reduction, or nullopt.
std::optional<sbprt::Sbp::Reduce> parseReduce(llvm::StringRef text);
llvm::StringRef reduceName(sbprt::Sbp::Reduce reduce);

} // namespace sbpc::exec
