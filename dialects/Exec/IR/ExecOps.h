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
/// Unit attribute --exec-plan-memory sets on the load of a parameter and
/// the store of its update (of the same name) when they share one place
/// that nothing else takes while the program runs: the next training step
/// in the same process (the rank's --steps) finds the update there.
constexpr llvm::StringLiteral kResident = "exec.resident";

/// Op attribute set by --sbp-spmdize on the ops whose ids are checked at
/// run time (sbpc::idsOperandOf): where the ids come from in the input the
/// user gave and how they are laid out, for the rank's message when one is
/// out of range. A dictionary: shape (the ids' global shape), layout, and
/// when they come from an input, slices (three arrays a slice: result,
/// source, starts), origin ("input 'NAME'") and origin_shape.
constexpr llvm::StringLiteral kIndexPlace = "exec.index_place";
mlir::DictionaryAttr indexPlaceAttr(mlir::MLIRContext *ctx, const sbprt::IndexPlace &place,
                                    const sbprt::NdSbp &layout);
/// The place and layout `attr` holds; nullopt when it is malformed.
std::optional<std::pair<sbprt::IndexPlace, sbprt::NdSbp>>
parseIndexPlace(mlir::DictionaryAttr attr);

/// Whether `fn` is an exec program (spmdized).
bool isProgram(mlir::Operation *fn);

/// "sum" or "max" as the runtime's reduction, or nullopt.
std::optional<sbprt::Sbp::Reduce> parseReduce(llvm::StringRef text);
llvm::StringRef reduceName(sbprt::Sbp::Reduce reduce);

} // namespace sbpc::exec
