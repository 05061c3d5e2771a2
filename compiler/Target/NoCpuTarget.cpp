// Without MPI there are no rank executables: --target cpu says so.
#include "compiler/Target/CpuTarget.h"

#include "compiler/Support/Diagnostics.h"

mlir::LogicalResult sbpc::buildCpuTarget(mlir::ModuleOp, const std::string &, const std::string &,
                                         nlohmann::json &) {
  return reportError("--target cpu needs MPI, and this sbpc was built without it "
                     "(install libopenmpi-dev openmpi-bin and rebuild)");
}
