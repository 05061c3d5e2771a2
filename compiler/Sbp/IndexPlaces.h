// Where the ids of an embedding or a cross-entropy come from, so that a
// rank that finds one out of range names it by its place in the input the
// user gave (runtime/Layout.h's IndexPlace), not by its position in the
// rank's block, nor in a micro-batch.
#pragma once

#include "runtime/Layout.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace sbpc {

/// The operand of `op` that holds ids checked at run time (graph.embedding's
/// and graph.embedding_grad's indices, graph.cross_entropy's and its
/// gradient's targets); null for other ops.
mlir::OpOperand *idsOperandOf(mlir::Operation *op);

/// Where `ids` come from: their shape, and when they are a graph.input
/// argument seen through reshapes, static slices and boxings (micro-batches
/// are such slices), the slices and "input 'NAME'" with its shape. The
/// rank's block (block, offsets) is the caller's to fill.
sbprt::IndexPlace indexPlaceOf(mlir::Value ids);

} // namespace sbpc
