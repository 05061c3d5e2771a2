// Which values of a program stay f32 when it computes in bf16 (`sbpc
// compile --precision bf16`): one rule for the exec programs, where
// --exec-bf16 applies it, and for the laid-out graph, where the boxings and
// costs are planned before the programs exist (docs/spmd.md, Precision).
#pragma once

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace sbpc::graph {

/// What keeps f32 in a bf16 program.
struct F32Storage {
  /// Ops that compute and store their results in f32.
  llvm::DenseSet<mlir::Operation *> ops;
  /// Uses that read a value in f32 (the rest read it in bf16, so a change
  /// of layout on the way moves 2-byte elements).
  llvm::DenseSet<mlir::OpOperand *> uses;
  /// Block arguments kept in f32.
  llvm::DenseSet<mlir::Value> arguments;

  /// Whether `value` (a float tensor) is stored in f32.
  bool isF32(mlir::Value value) const;
};

/// The f32 part of `block` under bf16 compute. The optimizer updates stay
/// f32, and so does every op that an update's state (not its gradient) or a
/// stored value depends on without depending on an input: the step counter,
/// a ZeRO shard of a parameter, the updated parameters on their way to their
/// stores. So do the sums over micro-batches (graph.accumulate). Everything
/// that depends on an input (the forward and the backward), or is used only
/// there, is bf16.
///
/// `isInput(v)`: v is a model input (a graph.input argument, an exec.load of
/// an input, a received value). `isStore(op)`: op stores each of its operands
/// (func.return of a graph function, exec.store).
F32Storage findF32Storage(mlir::Block &block, llvm::function_ref<bool(mlir::Value)> isInput,
                          llvm::function_ref<bool(mlir::Operation *)> isStore);

} // namespace sbpc::graph
