// sbpc-opt: the mlir-opt-style driver with sbpc's dialects and passes.
#include "compiler/Sbp/Signatures.h"
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Exec/Passes.h"
#include "passes/Graph/Passes.h"
#include "passes/Sbp/Passes.h"

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
  // An error is its line, not the whole function after it ("see current
  // operation: ..."): --mlir-print-op-on-diagnostic brings it back.
  mlir::registerMLIRContextCLOptions();
  auto &options = llvm::cl::getRegisteredOptions();
  if (auto it = options.find("mlir-print-op-on-diagnostic"); it != options.end())
    static_cast<llvm::cl::opt<bool> *>(it->second)->setInitialValue(false);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "sbpc optimizer driver\n", registry));
}
