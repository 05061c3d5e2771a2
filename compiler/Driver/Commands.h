// The work behind `sbpc gen` and `sbpc run`; the tool only maps flags to these.
#pragma once

#include "compiler/Gen/ModelGen.h"
#include "runtime/Layout.h"
#include "runtime/Tensor.h"
#include "runtime/rank/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
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
  bool quiet = false; // no "wrote" lines
};

/// Evaluates a model with the reference evaluator and writes every result
/// as <outputDir>/<name>.npy, printing one line per file.
mlir::LogicalResult runReference(mlir::MLIRContext &ctx, const RunCommand &command);

/// Runs a directory written by `sbpc compile --target cpu` (its launch.sh
/// under mpirun) with the given parameters and inputs, assembles every
/// output into <outputDir>/<name>.npy and what the ranks measured into
/// <outputDir>/run.json. A failing rank's message becomes the error.
using ProgramManifest = sbprt::rank::ProgramManifest;
/// Reads `dir`/program.json; a one-line error if it is missing or is not
/// one sbpc compile wrote, or a rank's executable is missing.
mlir::FailureOr<ProgramManifest> readProgramManifest(const std::string &dir);

struct RunCompiledCommand {
  std::string programDir;
  std::string paramsPath;
  std::vector<std::string> inputs;
  std::string outputDir;
  uint64_t memoryLimit = 0;
  /// A rank whose op makes no progress this long ends the job.
  double timeout = 600;
  bool quiet = false; // no progress or "wrote" lines
  /// Runs of the program in each rank's process (timed; run.json's repeats).
  int64_t repeat = 1;
  /// Time every op too (run.json's ranks[].ops).
  bool profileOps = false;
  /// Above 0: that many training steps in the ranks' processes (their
  /// --steps), each update of a parameter the next step's value of it; the
  /// outputs are the last step's. An earlier step K writes only the
  /// outputs `stepOutputs` names, as shards in <outputDir>/.steps/K
  /// (assembleOutput), with a rankR.done from each rank once it has.
  int64_t steps = 0;
  std::vector<std::string> stepOutputs;
  /// Above 0: every output too at each step K that is a multiple of it.
  int64_t saveEvery = 0;
  /// Called now and then while the ranks run, and once after they have;
  /// false stops them (the run then fails).
  std::function<bool()> whileRunning;
};
mlir::LogicalResult runCompiled(const RunCompiledCommand &command);

/// `sbpc run --steps N`: runs a training-step program (a model after
/// --graph-autodiff and --graph-optimizer, or a directory compiled from
/// one) N times, each step's outputs named like parameters becoming the
/// next step's parameters; optimizer states missing from the parameters
/// file start at zero (the step counter at 1). Writes <outputDir>/losses.npy
/// (one loss per step) and <outputDir>/params.safetensors (the final
/// parameters and optimizer states); with `saveEvery`, the state after
/// every saveEvery-th step to <outputDir>/checkpoint.safetensors.
struct TrainCommand {
  std::string target; // model file or compiled directory
  std::string paramsPath;
  std::vector<std::string> inputs;
  std::string outputDir;
  int64_t steps = 1;
  uint64_t memoryLimit = 0;
  double timeout = 600;
  int64_t saveEvery = 0;
};
mlir::LogicalResult runTraining(mlir::MLIRContext &ctx, const TrainCommand &command);

/// Prints report.json for a person; a one-line error if it is not a report.
mlir::LogicalResult runExplain(const std::string &reportPath);

} // namespace sbpc
