// The SBP pipeline: what sbpc compile runs and sbpc-opt offers as --sbp-layout.
#include "passes/Sbp/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void sbpc::sbp::buildSbpPipeline(OpPassManager &pm, const SbpPipelineOptions &options) {
  SbpPropagateOptions propagate;
  propagate.cluster = options.cluster;
  pm.addPass(createSbpPropagate(propagate));
  SbpInsertBoxingOptions boxing;
  boxing.cluster = options.cluster;
  pm.addPass(createSbpInsertBoxing(boxing));
}

void sbpc::sbp::registerSbpPipelines() {
  PassPipelineRegistration<SbpPipelineOptions>(
      "sbp-layout", "Lay a seeded model out on its mesh: propagate, then insert boxing",
      buildSbpPipeline);
}
