// SBP signatures of ops on a mesh: the graph ops' 1-D rules (external models
// of SbpOpInterface) and nd signatures formed from them axis by axis.
#pragma once

#include "dialects/Sbp/IR/SbpInterfaces.h"
#include "runtime/Layout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Operation.h"

#include <vector>

namespace sbpc {

/// Attaches SbpOpInterface to every graph op.
void registerGraphSbpModels(mlir::DialectRegistry &registry);

/// One nd layout per operand and per result of an op.
struct NdSignature {
  std::vector<sbprt::NdSbp> operands, results;
};

/// Every legal nd signature of `op` on `mesh`. Mesh axes are taken outermost
/// first; each axis's 1-D rules see the local shapes the outer axes leave,
/// and keep only splits that divide. Layouts that mix P(sum) and P(max), and
/// partial layouts of integer values, are dropped. Empty when the op has no
/// SbpOpInterface.
std::vector<NdSignature> ndSignatures(mlir::Operation *op, const sbprt::Mesh &mesh);

/// Clones `op` to run on one device: operands mapped through `operands`
/// (already of local types), results of `resultTypes`, and attributes that
/// spell global sizes rewritten for the local shapes (a slice's limits on
/// dimensions it keeps whole). This is how every signature's local
/// computation is formed.
mlir::Operation *cloneWithLocalShapes(mlir::OpBuilder &b, mlir::Operation *op,
                                      mlir::IRMapping &operands, mlir::TypeRange resultTypes);

/// The local shape of a value of global `shape` laid out as `layout`.
std::vector<int64_t> localShape(const sbprt::Mesh &mesh, const sbprt::NdSbp &layout,
                                std::vector<int64_t> shape);

} // namespace sbpc
