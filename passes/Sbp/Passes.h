// The SBP passes: propagation and explicit boxing.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <memory>

namespace sbpc::sbp {

#define GEN_PASS_DECL
#include "passes/Sbp/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Sbp/Passes.h.inc"

struct SbpPipelineOptions : public mlir::PassPipelineOptions<SbpPipelineOptions> {
  Option<std::string> cluster{*this, "cluster",
                              llvm::cl::desc("Cluster preset or JSON file for the cost model"),
                              llvm::cl::init("cpu")};
};

/// Layouts from seeds, then every change of layout made explicit:
/// --sbp-propagate, --sbp-insert-boxing.
void buildSbpPipeline(mlir::OpPassManager &pm, const SbpPipelineOptions &options);

/// Registers the passes and the pipeline (as --sbp-layout).
void registerSbpPipelines();

} // namespace sbpc::sbp
