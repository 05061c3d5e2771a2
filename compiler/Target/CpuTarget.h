// `sbpc compile --target cpu`: from a laid-out module to a directory of
// per-rank executables.
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

#include <string>

namespace sbpc {

/// Lowers `module` (layouts and boxings explicit) to exec programs, plans
/// their memory, and writes into `outputDir`: exec.mlir, src/<program>.cpp,
/// bin/<program> built by the host compiler with bin/rank<r> links to it,
/// launch.sh and program.json (what `sbpc run` needs). Adds to `report`
/// each rank's program, arena bytes and bytes sent.
mlir::LogicalResult buildCpuTarget(mlir::ModuleOp module, const std::string &cluster,
                                   const std::string &outputDir, nlohmann::json &report);

} // namespace sbpc
