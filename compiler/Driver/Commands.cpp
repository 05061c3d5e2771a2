// `sbpc gen` and `sbpc run`: generate a model; evaluate one with the reference.
#include "compiler/Driver/Commands.h"

#include "compiler/Model/ModelSignature.h"
#include "compiler/Reference/Evaluator.h"
#include "compiler/Report/Report.h"
#include "compiler/Support/Diagnostics.h"
#include "compiler/Support/JsonFile.h"
#include "compiler/Support/Paths.h"
#include "dialects/Graph/IR/GraphOps.h"
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
  if (!command.paramsPath.empty() && samePath(command.paramsPath, command.output))
    return reportError("-o and --params both name " + command.output +
                       ": the model and its parameters need two files");
  auto file = openOutputFile(command.output, &error);
  if (!file)
    return reportError(command.output + ": " + error);
  model.module->print(file->os());
  // The model is kept only with its parameters: a failed --params leaves
  // neither file.
  if (!command.paramsPath.empty() &&
      !writeInitialParams(model.params, command.paramsPath, command.seed, error))
    return reportError(error);
  file->keep();
  return success();
}

namespace {

/// MLIR's parser recurses once per nested region, attribute array or
/// parenthesis, and a few thousand levels overflow its stack: deeper input
/// is refused first, at the bracket that goes too deep.
constexpr int kMaxNesting = 256;

/// The "line:col" of the first (, [ or { nested deeper than kMaxNesting
/// (strings and comments aside), or "".
std::string tooDeep(llvm::StringRef text) {
  int depth = 0, line = 1, column = 0;
  bool inString = false, inComment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line, column = 0, inComment = false;
      continue;
    }
    if (inComment)
      continue;
    if (inString) {
      if (c == '\\')
        ++i, ++column;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/')
      inComment = true;
    else if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        return std::to_string(line) + ":" + std::to_string(column);
    } else if (c == ')' || c == ']' || c == '}') {
      --depth;
    }
  }
  return "";
}

} // namespace

OwningOpRef<ModuleOp> sbpc::parseModelFile(const std::string &path, MLIRContext &ctx) {
  std::string error;
  auto buffer = openInputFile(path, &error);
  if (!buffer) {
    (void)sbpc::reportError(path + ": " + error);
    return nullptr;
  }
  if (std::string at = tooDeep(buffer->getBuffer()); !at.empty()) {
    llvm::errs() << path << ":" << at << ": error: nested more than " << kMaxNesting
                 << " levels deep\n";
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  // A rank program given for a model: say what it is, rather than that the
  // exec dialect is not registered here.
  ScopedDiagnosticHandler rankProgram(&ctx, [](Diagnostic &diag) {
    if (!llvm::StringRef(diag.str()).starts_with("Dialect `exec' not found"))
      return failure();
    std::string at = formatLocation(diag.getLocation());
    llvm::errs() << (at.empty() ? "" : at + ": ")
                 << "error: this is a rank program (the exec.mlir sbpc compile --target "
                    "writes), not a model: give the model it was compiled from, or run the "
                    "compiled directory (sbpc run DIR)\n";
    return success();
  });
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
  std::vector<std::string> written, read = {command.modelPath, command.paramsPath};
  for (const std::string &name : signature->outputs)
    written.push_back(name + ".npy");
  for (const auto &[name, path] : inputs)
    read.push_back(path);
  if (failed(refuseOverwritingInputs("--output-dir", command.outputDir, written, read)))
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
  for (auto [i, name, tensor] : llvm::enumerate(signature->outputs, *results)) {
    // In the shape its file has (graph.param_shape), if another.
    if (auto stored = signature->func.getResultAttrOfType<DenseI64ArrayAttr>(
            i, graph::GraphDialect::kParamShapeAttr))
      (void)tensor.reshape(std::vector<int64_t>(stored.asArrayRef().begin(), stored.asArrayRef().end()));
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
  std::optional<nlohmann::json> report = parseJson(buffer->getBuffer().str(), reportPath, error);
  if (!report)
    return reportError(error);
  // Print only once the whole report has been read: a field of the wrong
  // type (nlohmann throws) then leaves no half-printed plan behind.
  std::string text;
  llvm::raw_string_ostream os(text);
  try {
    if (failed(explainReport(*report, os, error)))
      return reportError(reportPath + ": not an sbpc report: " + error);
  } catch (const nlohmann::json::exception &e) {
    return reportError(reportPath + ": not an sbpc report: " + jsonErrorText(e));
  }
  llvm::outs() << text;
  return success();
}
