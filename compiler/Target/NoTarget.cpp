// Without MPI there are no rank executables: --target says so.
#include "compiler/Target/Target.h"

#include "compiler/Support/Diagnostics.h"

std::string sbpc::runtimeSourcesClash(const std::string &) { return ""; }

mlir::LogicalResult sbpc::buildTarget(mlir::ModuleOp, const std::string &, const TargetOptions &,
                                      const std::string &, nlohmann::json &) {
  return reportError("--target needs MPI, and this sbpc was built without it "
                     "(install libopenmpi-dev openmpi-bin and rebuild)");
}
