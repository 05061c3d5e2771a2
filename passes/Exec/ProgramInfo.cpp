// Memory and communication of exec programs.
#include "passes/Exec/ProgramInfo.h"

#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using sbprt::comm::Kind;

namespace sbpc::exec {

size_t valueBytes(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return static_cast<size_t>(type.getNumElements()) * (type.getElementTypeBitWidth() / 8);
}

std::optional<CollectiveCall> collectiveCall(Operation *op, const sbprt::Mesh &mesh) {
  auto call = [&](Kind kind, int64_t axis, int64_t dim = 0) -> std::optional<CollectiveCall> {
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    sbprt::comm::Local input{{type.getShape().begin(), type.getShape().end()},
                             static_cast<size_t>(type.getElementTypeBitWidth() / 8)};
    return CollectiveCall{kind, static_cast<size_t>(axis), input, mesh.shape[axis], dim};
  };
  return llvm::TypeSwitch<Operation *, std::optional<CollectiveCall>>(op)
      .Case([&](AllReduceOp o) { return call(Kind::AllReduce, o.getAxis()); })
      .Case([&](AllGatherOp o) { return call(Kind::AllGather, o.getAxis(), o.getDim()); })
      .Case([&](ReduceScatterOp o) {
        return call(Kind::ReduceScatter, o.getAxis(), o.getDim());
      })
      .Case([&](AllToAllOp o) { return call(Kind::AllToAll, o.getAxis(), o.getSplitDim()); })
      .Case([&](BroadcastOp o) { return call(Kind::Broadcast, o.getAxis()); })
      .Default([](Operation *) { return std::nullopt; });
}

FailureOr<sbprt::Mesh> programMesh(func::FuncOp program) {
  auto module = program->getParentOfType<ModuleOp>();
  auto meshes = llvm::to_vector(module.getOps<sbp::MeshOp>());
  if (meshes.size() != 1)
    return program.emitOpError() << "needs exactly one sbp.mesh in its module, found "
                                 << meshes.size();
  return meshes.front().toMesh();
}

uint64_t commBytesOfRank(func::FuncOp program, const sbprt::Mesh &mesh, int64_t rank) {
  std::vector<int64_t> coordinates = mesh.coordinates(rank);
  uint64_t bytes = 0;
  program.walk([&](Operation *op) {
    if (std::optional<CollectiveCall> call = collectiveCall(op, mesh)) {
      int64_t root = 0;
      if (auto broadcast = dyn_cast<BroadcastOp>(op))
        root = broadcast.getRoot();
      bytes += sbprt::comm::ringBytesSent(call->kind, call->input, call->groupSize,
                                          coordinates[call->axis], root);
    } else if (auto send = dyn_cast<SendOp>(op)) {
      bytes += valueBytes(send.getInput());
    }
  });
  return bytes;
}

} // namespace sbpc::exec
