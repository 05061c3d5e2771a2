// What flash attention keeps out of memory in a bf16 program: attention's
// [..., S, T] scores and probabilities and their gradients, which
// --exec-fuse folds into exec.attention and exec.attention_grad
// (passes/Exec/ExecFuse.cpp). Found here on the graph, before the programs
// exist, so that the search's and the report's memory estimates do not
// count them; the rules are ExecFuse's, read on the unfused graph ops
// (docs/cuda.md, Flash attention).
#pragma once

#include "dialects/Graph/IR/GraphOps.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <utility>

namespace sbpc::graph {

/// `value`'s producer when it is an OpTy in `block` and nothing else reads
/// `value`.
template <typename OpTy> OpTy soleProducer(mlir::Value value, mlir::Block *block) {
  auto op = value.getDefiningOp<OpTy>();
  return op && op->getBlock() == block && value.hasOneUse() ? op : OpTy();
}

/// When `mul` multiplies by a 0-d scale: its other operand and the scale.
std::optional<std::pair<mlir::Value, mlir::Value>> scaledOperand(MulOp mul);

/// Whether `axis` is the last of `value`'s.
bool overLastAxis(mlir::Value value, int64_t axis);

/// Whether flash attention takes q [..., S, D], k [..., T, D] and
/// v [..., T, D]: one rank (3 or more), one element type, the same leading
/// dimensions, heads of an even width up to 128.
bool attentionShapes(mlir::Value q, mlir::Value k, mlir::Value v);

/// The matmuls in `block` that read `value` as their lhs, besides `except`,
/// neither transposing its rhs nor reading `value` twice: at most one as it
/// is (`plain`) and one transposing it (`transposed`); false where `value`
/// has other readers.
bool lhsReaders(mlir::Value value, mlir::Operation *except, mlir::Block *block, MatmulOp &plain,
                MatmulOp &transposed);

/// The attention cores of a block that --exec-fuse makes flash attention.
struct FusedAttention {
  /// One exec.attention, or one exec.attention_grad with the forward it
  /// reads (an exec.attention of its own or, recomputed, an earlier core's).
  struct Core {
    /// The graph ops it replaces, and for a recomputing backward its
    /// forward's: it fuses only where each reads its operands as they are
    /// made, with no change of layout between.
    llvm::SmallVector<mlir::Operation *> ops;
    /// Its values no program stores: the scores, their scaled and masked
    /// forms, the probabilities; with a backward, dO v^T and the softmax's
    /// gradient chain.
    llvm::SmallVector<mlir::Value> unstored;
    /// With a backward: the forward's probabilities, whose place each query
    /// row's log-sum-exp ([..., S], f32) takes; the forward's output, which
    /// the backward reads again; the backward's first op, until which both
    /// live.
    mlir::Value logSumExp, output;
    mlir::Operation *backward = nullptr;
  };
  std::vector<Core> cores;
  /// The core of each value in a core's `unstored`, and the backward core
  /// that keeps each `logSumExp` and `output`.
  llvm::DenseMap<mlir::Value, unsigned> coreOf, keptBy;
  /// exec.attention ops the programs will have.
  size_t forwards = 0;
  /// exec.attention_grad ops the programs will have.
  size_t backwards = 0;

  /// The share of `value`'s bytes (`elementBytes` an element) the programs
  /// store, where `fuses(c)` says whether core c fuses: 1; 0 for what a
  /// fused core never stores; for probabilities whose log-sum-exp a fused
  /// backward keeps, that ([..., S] f32 of [..., S, T]).
  double storedShare(mlir::Value value, size_t elementBytes,
                     llvm::function_ref<bool(unsigned)> fuses) const;
  /// The op until which `value` lives besides its readers, where `fuses`
  /// as above: a fused backward's first op for its forward's output and
  /// log-sum-exp; null for any other value.
  mlir::Operation *livesUntil(mlir::Value value, llvm::function_ref<bool(unsigned)> fuses) const;
};

/// The cores of `block` (a graph function's body, laid out or not): q, k and
/// v of a rank of 3 or more with the same leading dimensions and heads of
/// an even width up to 128; softmax(causal_mask(matmul(q, k^T) * s)) over
/// the last axis (the mask and the scale optional) read only by matmul(p, v)
/// in a forward; in a training step, the probabilities read by
/// softmax_grad(p, matmul(dO, v^T)) (then causal_mask_grad and the same
/// scale where the forward has them), by matmul(p^T, dO) and by matmul(p, v)
/// or, recomputed, by nothing else, an earlier core of the same q, k and v
/// giving the output; the scores' gradient read by matmul(ds, k) and
/// matmul(ds^T, q) alone. Every intermediate is read once, by the next.
/// `inBf16(v)`: v is held in bf16 (q, k and v must be).
FusedAttention findFusedAttention(mlir::Block &block,
                                  llvm::function_ref<bool(mlir::Value)> inBf16);

} // namespace sbpc::graph
