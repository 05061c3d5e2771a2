// The work behind `sbpc gen` and `sbpc run`; the tool only maps flags to these.
#pragma once

#include "compiler/Gen/ModelGen.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <variant>

namespace sbpc {

/// Parses a model file; diagnostics go to the context's handler.
mlir::OwningOpRef<mlir::ModuleOp> parseModelFile(const std::string &path, mlir::MLIRContext &ctx);

struct GenCommand {
  std::variant<GptOptions, MlpOptions> model;
  std::string output = "-";
  /// Empty: write no parameters.
  std::string paramsPath;
  uint64_t seed = 0;
};

/// Generates a model into `output` and, if asked, its initial parameters.
mlir::LogicalResult runGen(mlir::MLIRContext &ctx, const GenCommand &command);

struct RunCommand {
  std::string modelPath;
  std::string paramsPath;
  /// "NAME=FILE.npy" as given on the command line.
  std::vector<std::string> inputs;
  std::string outputDir;
};

/// Evaluates a model with the reference evaluator and writes every result
/// as <outputDir>/<name>.npy, printing one line per file.
mlir::LogicalResult runReference(mlir::MLIRContext &ctx, const RunCommand &command);

/// Prints report.json for a person; a one-line error if it is not a report.
mlir::LogicalResult runExplain(const std::string &reportPath);

} // namespace sbpc
