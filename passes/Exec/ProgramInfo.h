// What an exec program needs of memory and communication, as the memory
// plan, the emitters and the report all count it.
#pragma once

#include "runtime/Layout.h"
#include "runtime/comm/Communicator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace sbpc::exec {

/// A collective op as the communicator sees it.
struct CollectiveCall {
  sbprt::comm::Kind kind;
  size_t axis;
  sbprt::comm::Local input;
  int64_t groupSize;
  /// The dimension gathered or scattered along (all-to-all: split); 0 for
  /// all-reduce and broadcast.
  int64_t dim;
};

/// The collective `op` performs, if it is one.
std::optional<CollectiveCall> collectiveCall(mlir::Operation *op, const sbprt::Mesh &mesh);

/// Bytes of a local tensor value.
size_t valueBytes(mlir::Value value);

/// The mesh of an exec program (its module's sbp.mesh).
mlir::FailureOr<sbprt::Mesh> programMesh(mlir::func::FuncOp program);

/// The bytes rank `rank` sends running `program` (ring algorithms; see
/// sbprt::comm::ringBytesSent).
uint64_t commBytesOfRank(mlir::func::FuncOp program, const sbprt::Mesh &mesh, int64_t rank);

} // namespace sbpc::exec
