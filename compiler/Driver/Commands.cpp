// `sbpc gen` and `sbpc run`: generate a model; evaluate one with the reference.
#include "compiler/Driver/Commands.h"

#include "compiler/Model/ModelSignature.h"
#include "compiler/Reference/Evaluator.h"
#include "compiler/Report/Report.h"
#include "compiler/Support/Diagnostics.h"
#include "runtime/io/Npy.h"
#include "runtime/io/Safetensors.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

LogicalResult sbpc::runGen(MLIRContext &ctx, const GenCommand &command) {
  std::string error;
  GeneratedModel model = std::visit(
      [&](const auto &options) {
        if constexpr (std::is_same_v<std::decay_t<decltype(options)>, GptOptions>)
          return buildGpt(&ctx, options, error);
        else
          return buildMlp(&ctx, options, error);
      },
      command.model);
  if (!model.module)
    return reportError(error);
  if (failed(verify(*model.module)))
    return failure();
  // Refuse before writing anything rather than after a long print.
  if (!command.paramsPath.empty() && !checkParamMemory(model.params, command.paramsPath, error))
    return reportError(error);
  auto file = openOutputFile(command.output, &error);
  if (!file)
    return reportError(command.output + ": " + error);
  model.module->print(file->os());
  file->keep();
  if (!command.paramsPath.empty() &&
      !writeInitialParams(model.params, command.paramsPath, command.seed, error))
    return reportError(error);
  return success();
}

OwningOpRef<ModuleOp> sbpc::parseModelFile(const std::string &path, MLIRContext &ctx) {
  std::string error;
  auto buffer = openInputFile(path, &error);
  if (!buffer) {
    (void)sbpc::reportError(path + ": " + error);
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &ctx);
}

LogicalResult sbpc::runReference(MLIRContext &ctx, const RunCommand &command) {
  std::map<std::string, std::string> inputs;
  for (const std::string &spec : command.inputs) {
    auto [name, path] = llvm::StringRef(spec).split('=');
    if (name.empty() || path.empty())
      return reportError("--input '" + spec + "' must be NAME=FILE.npy");
    if (!inputs.emplace(name.str(), path.str()).second)
      return reportError("--input '" + name.str() + "' is given twice");
  }
  OwningOpRef<ModuleOp> module = parseModelFile(command.modelPath, ctx);
  if (!module)
    return failure();
  FailureOr<ModelSignature> signature = getModelSignature(*module);
  if (failed(signature))
    return failure();

  std::optional<sbprt::io::SafetensorsFile> params;
  if (!command.paramsPath.empty()) {
    std::string error;
    params = sbprt::io::SafetensorsFile::open(command.paramsPath, error);
    if (!params)
      return reportError(error);
  }
  FailureOr<std::vector<sbprt::Tensor>> arguments =
      loadArguments(*signature, params ? &*params : nullptr, inputs);
  if (failed(arguments))
    return failure();
  FailureOr<std::vector<sbprt::Tensor>> results = evaluate(signature->func, std::move(*arguments));
  if (failed(results))
    return failure();

  if (std::error_code ec = llvm::sys::fs::create_directories(command.outputDir))
    return reportError(command.outputDir + ": cannot create: " + ec.message());
  for (auto [name, tensor] : llvm::zip(signature->outputs, *results)) {
    llvm::SmallString<256> path(command.outputDir);
    llvm::sys::path::append(path, name + ".npy");
    std::string error;
    if (!sbprt::io::writeNpy(path.str().str(), tensor, error))
      return reportError(error);
    if (!command.quiet)
      llvm::outs() << "wrote " << path << " " << sbprt::shapeToString(tensor.shape()) << "\n";
  }
  return success();
}

LogicalResult sbpc::runExplain(const std::string &reportPath) {
  std::string error;
  auto buffer = openInputFile(reportPath, &error);
  if (!buffer)
    return reportError(reportPath + ": " + error);
  nlohmann::json report =
      nlohmann::json::parse(buffer->getBuffer().str(), nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded())
    return reportError(reportPath + ": not valid JSON");
  // Print only once the whole report has been read: a field of the wrong
  // type (nlohmann throws) then leaves no half-printed plan behind.
  std::string text;
  llvm::raw_string_ostream os(text);
  try {
    if (failed(explainReport(report, os, error)))
      return reportError(reportPath + ": not an sbpc report: " + error);
  } catch (const nlohmann::json::exception &e) {
    return reportError(reportPath + ": not an sbpc report: " + e.what());
  }
  llvm::outs() << text;
  return success();
}
