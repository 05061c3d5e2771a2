// sbpc: generate models and evaluate them (compile and explain arrive with the SBP core).
#include "compiler/Gen/ModelGen.h"
#include "compiler/Model/ModelSignature.h"
#include "compiler/Reference/Evaluator.h"
#include "compiler/Support/Diagnostics.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "runtime/io/Npy.h"
#include "runtime/io/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <random>

using namespace mlir;
namespace cl = llvm::cl;

//===----------------------------------------------------------------------===//
// sbpc gen
//===----------------------------------------------------------------------===//

static cl::SubCommand genCommand("gen", "Generate a model (gpt or mlp) in the graph dialect");
static cl::OptionCategory genCategory("gen options");
static cl::opt<std::string> genModel(cl::Positional, cl::desc("<gpt|mlp>"), cl::Required,
                                     cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<std::string> genOutput("o", cl::desc("Write the model to <file> (default: stdout)"),
                                      cl::value_desc("file"), cl::init("-"), cl::sub(genCommand),
                                      cl::cat(genCategory));
static cl::opt<std::string> genParams("params",
                                      cl::desc("Also write initial parameters (GPT-2 initialization) to <file> (.safetensors)"),
                                      cl::value_desc("file"), cl::sub(genCommand),
                                      cl::cat(genCategory));
static cl::opt<uint64_t> genSeed("seed", cl::desc("Seed of the initial parameters (default 0)"), cl::init(0),
                                 cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<bool> genLoss("loss", cl::desc("Take `targets` and also return the mean cross-entropy `loss`"),
                             cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genLayers("layers", cl::desc("Transformer blocks (gpt) or linear layers (mlp) (default 2)"),
                                  cl::init(2), cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genHidden("hidden", cl::desc("Hidden width (default 64)"), cl::init(64),
                                  cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genHeads("heads", cl::desc("gpt: attention heads (default 4)"), cl::init(4),
                                 cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genSeq("seq", cl::desc("gpt: sequence length (default 16)"), cl::init(16),
                               cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genBatch("batch", cl::desc("Batch size (default 2)"), cl::init(2), cl::sub(genCommand),
                                 cl::cat(genCategory));
static cl::opt<int64_t> genVocab("vocab", cl::desc("gpt: vocabulary size (default 128)"), cl::init(128),
                                 cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genPositions("positions",
                                     cl::desc("gpt: rows of wpe.weight (default: --seq; GPT-2 checkpoints have 1024)"),
                                     cl::init(0), cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genInputs("inputs", cl::desc("mlp: input features (default 32)"), cl::init(32),
                                  cl::sub(genCommand), cl::cat(genCategory));
static cl::opt<int64_t> genOutputs("outputs", cl::desc("mlp: output features (classes) (default 16)"), cl::init(16),
                                   cl::sub(genCommand), cl::cat(genCategory));

namespace {
/// Deterministic normal variates from a seed, the same on every platform
/// (std::normal_distribution is not).
class NormalSource {
public:
  explicit NormalSource(uint64_t seed) : engine(seed) {}
  float next(float stddev) {
    // Box-Muller on two uniforms in (0, 1].
    double u1 = (static_cast<double>(engine() >> 11) + 1.0) / 9007199254740992.0;
    double u2 = static_cast<double>(engine() >> 11) / 9007199254740992.0;
    return static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(2.0 * M_PI * u2));
  }

private:
  std::mt19937_64 engine;
};
} // namespace

/// GPT-2's initialization, by parameter name: LayerNorm scales 1, biases 0,
/// residual output projections N(0, 0.02/sqrt(2 layers)), other weights N(0, 0.02).
static float initialStddev(llvm::StringRef name, int64_t layers, bool &isOne) {
  isOne = name.contains("ln") && name.ends_with(".weight");
  if (isOne || name.ends_with(".bias"))
    return 0.0f;
  if (name.ends_with("c_proj.weight"))
    return 0.02f / std::sqrt(2.0f * static_cast<float>(layers));
  return 0.02f;
}

static LogicalResult writeInitialParams(const sbpc::ModelSignature &signature,
                                        const std::string &path, uint64_t seed, int64_t layers) {
  NormalSource normal(seed);
  std::vector<std::pair<std::string, sbprt::Tensor>> tensors;
  for (const sbpc::ModelArgument &arg : signature.arguments) {
    if (arg.kind != sbpc::ModelArgument::Kind::Param)
      continue;
    sbprt::Tensor t(sbprt::DType::F32, {arg.storedShape.begin(), arg.storedShape.end()});
    bool isOne;
    float stddev = initialStddev(arg.name, layers, isOne);
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.as<float>()[i] = isOne ? 1.0f : stddev == 0.0f ? 0.0f : normal.next(stddev);
    tensors.emplace_back(arg.name, std::move(t));
  }
  std::vector<std::pair<std::string, const sbprt::Tensor *>> refs;
  for (auto &[name, t] : tensors)
    refs.emplace_back(name, &t);
  std::string error;
  if (!sbprt::io::writeSafetensors(path, refs, error))
    return sbpc::reportError(error);
  return success();
}

static LogicalResult writeText(const std::string &path, ModuleOp module) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file)
    return sbpc::reportError(path + ": " + error);
  module.print(file->os());
  file->keep();
  return success();
}

static LogicalResult runGen(MLIRContext &ctx) {
  std::string error;
  OwningOpRef<ModuleOp> module;
  if (genModel == "gpt") {
    sbpc::GptOptions o;
    o.layers = genLayers, o.hidden = genHidden, o.heads = genHeads, o.seq = genSeq;
    o.batch = genBatch, o.vocab = genVocab, o.positions = genPositions, o.loss = genLoss;
    module = sbpc::buildGpt(&ctx, o, error);
  } else if (genModel == "mlp") {
    sbpc::MlpOptions o;
    o.batch = genBatch, o.inputs = genInputs, o.hidden = genHidden, o.outputs = genOutputs;
    o.layers = genLayers, o.loss = genLoss;
    module = sbpc::buildMlp(&ctx, o, error);
  } else {
    return sbpc::reportError("unknown model '" + genModel + "' (expected gpt or mlp)");
  }
  if (!module)
    return sbpc::reportError(error);
  if (failed(verify(*module)))
    return failure();
  if (failed(writeText(genOutput, *module)))
    return failure();
  if (genParams.empty())
    return success();
  FailureOr<sbpc::ModelSignature> signature = sbpc::getModelSignature(*module);
  if (failed(signature))
    return failure();
  return writeInitialParams(*signature, genParams, genSeed, genLayers);
}

//===----------------------------------------------------------------------===//
// sbpc run
//===----------------------------------------------------------------------===//

static cl::SubCommand runCommand("run", "Evaluate a model on one CPU (the reference evaluator)");
static cl::OptionCategory runCategory("run options");
static cl::opt<std::string> runModel(cl::Positional, cl::desc("<model.mlir>"), cl::Required,
                                     cl::sub(runCommand), cl::cat(runCategory));
static cl::opt<std::string> runParams("params", cl::desc("Parameters (.safetensors)"),
                                      cl::value_desc("file"), cl::sub(runCommand),
                                      cl::cat(runCategory));
static cl::list<std::string> runInputs("input", cl::desc("A model input: NAME=FILE.npy (repeatable)"),
                                       cl::value_desc("name=file"), cl::sub(runCommand),
                                       cl::cat(runCategory));
static cl::opt<std::string> runOutputDir("output-dir",
                                         cl::desc("Write every result as <dir>/<name>.npy"),
                                         cl::value_desc("dir"), cl::Required, cl::sub(runCommand),
                                         cl::cat(runCategory));

static OwningOpRef<ModuleOp> parseModel(const std::string &path, MLIRContext &ctx) {
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

static LogicalResult runRun(MLIRContext &ctx) {
  std::map<std::string, std::string> inputs;
  for (const std::string &spec : runInputs) {
    auto [name, path] = llvm::StringRef(spec).split('=');
    if (name.empty() || path.empty())
      return sbpc::reportError("--input '" + spec + "' must be NAME=FILE.npy");
    if (!inputs.emplace(name.str(), path.str()).second)
      return sbpc::reportError("--input '" + name.str() + "' is given twice");
  }
  OwningOpRef<ModuleOp> module = parseModel(runModel, ctx);
  if (!module)
    return failure();
  FailureOr<sbpc::ModelSignature> signature = sbpc::getModelSignature(*module);
  if (failed(signature))
    return failure();

  std::optional<sbprt::io::SafetensorsFile> params;
  if (!runParams.empty()) {
    std::string error;
    params = sbprt::io::SafetensorsFile::open(runParams, error);
    if (!params)
      return sbpc::reportError(error);
  }
  FailureOr<std::vector<sbprt::Tensor>> arguments =
      sbpc::loadArguments(*signature, params ? &*params : nullptr, inputs);
  if (failed(arguments))
    return failure();
  FailureOr<std::vector<sbprt::Tensor>> results =
      sbpc::evaluate(signature->func, std::move(*arguments));
  if (failed(results))
    return failure();

  if (std::error_code ec = llvm::sys::fs::create_directories(runOutputDir))
    return sbpc::reportError(runOutputDir + ": cannot create: " + ec.message());
  for (auto [name, tensor] : llvm::zip(signature->outputs, *results)) {
    llvm::SmallString<256> path(runOutputDir);
    llvm::sys::path::append(path, name + ".npy");
    std::string error;
    if (!sbprt::io::writeNpy(path.str().str(), tensor, error))
      return sbpc::reportError(error);
    llvm::outs() << "wrote " << path << " " << sbprt::shapeToString(tensor.shape()) << "\n";
  }
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&genCategory, &runCategory});
  cl::ParseCommandLineOptions(argc, argv,
                              "sbpc: automatic parallelization of deep-learning graphs\n\n"
                              "  sbpc gen gpt|mlp [options] -o model.mlir [--params p.safetensors]\n"
                              "  sbpc run model.mlir --params p.safetensors --input NAME=FILE.npy "
                              "--output-dir DIR\n");
  MLIRContext ctx;
  // Diagnostics are one line each; the op dump belongs in sbpc-opt, not here.
  ctx.printOpOnDiagnostic(false);
  ctx.loadDialect<sbpc::graph::GraphDialect, sbpc::sbp::SbpDialect, func::FuncDialect>();
  sbpc::OneLineDiagnostics diagnostics(&ctx);
  LogicalResult result = failure();
  if (genCommand)
    result = runGen(ctx);
  else if (runCommand)
    result = runRun(ctx);
  else
    result = sbpc::reportError("expected a command: gen or run (see sbpc --help)");
  return succeeded(result) ? 0 : 1;
}
