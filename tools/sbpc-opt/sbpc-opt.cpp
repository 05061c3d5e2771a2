// sbpc-opt: the mlir-opt-style driver with sbpc's dialects and passes.
#include "compiler/Sbp/Signatures.h"
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "passes/Exec/Passes.h"
#include "passes/Graph/Passes.h"
#include "passes/Sbp/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<sbpc::graph::GraphDialect, sbpc::sbp::SbpDialect, sbpc::exec::ExecDialect,
                  mlir::func::FuncDialect>();
  sbpc::registerGraphSbpModels(registry);
  // Generic clean-ups that are useful on any graph; sbpc's own passes join here.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  sbpc::sbp::registerSbpPasses();
  sbpc::sbp::registerSbpPipelines();
  sbpc::exec::registerExecPasses();
  sbpc::graph::registerGraphPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "sbpc optimizer driver\n", registry));
}
