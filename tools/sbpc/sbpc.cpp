// sbpc: the command-line tool; flags map to the commands in compiler/Driver.
#include "compiler/Driver/Commands.h"
#include "compiler/Driver/Compile.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Sbp/Strategies.h"
#include "compiler/Sbp/ValueLayouts.h"
#include "compiler/Support/Diagnostics.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"

#include <sstream>
#include "llvm/Support/InitLLVM.h"

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

/// An option as the user writes it: -o, --mesh.
static std::string flagName(const cl::Option &option) {
  return (option.ArgStr.size() == 1 ? "-" : "--") + option.ArgStr.str();
}

static mlir::LogicalResult runGenCommand(MLIRContext &ctx) {
  sbpc::GenCommand command;
  // An option of the other model would be silently ignored.
  auto refuse = [](std::initializer_list<cl::Option *> options) -> std::optional<std::string> {
    for (cl::Option *option : options)
      if (option->getNumOccurrences())
        return flagName(*option) + " does not apply to " + genModel + " (see sbpc gen --help)";
    return std::nullopt;
  };
  if (std::optional<std::string> wrong =
          genModel == "gpt"   ? refuse({&genInputs, &genOutputs})
          : genModel == "mlp" ? refuse({&genHeads, &genSeq, &genVocab, &genPositions})
                              : std::nullopt)
    return sbpc::reportError(*wrong);
  if (genModel == "gpt") {
    sbpc::GptOptions o;
    o.layers = genLayers, o.hidden = genHidden, o.heads = genHeads, o.seq = genSeq;
    o.batch = genBatch, o.vocab = genVocab, o.positions = genPositions, o.loss = genLoss;
    command.model = o;
  } else if (genModel == "mlp") {
    sbpc::MlpOptions o;
    o.batch = genBatch, o.inputs = genInputs, o.hidden = genHidden, o.outputs = genOutputs;
    o.layers = genLayers, o.loss = genLoss;
    command.model = o;
  } else {
    return sbpc::reportError("unknown model '" + genModel + "' (expected gpt or mlp)");
  }
  command.output = genOutput;
  command.paramsPath = genParams;
  command.seed = genSeed;
  return sbpc::runGen(ctx, command);
}

//===----------------------------------------------------------------------===//
// sbpc run
//===----------------------------------------------------------------------===//

static cl::SubCommand runCommand("run", "Run a compiled directory on its ranks, or evaluate a "
                                        "model on one CPU (the reference evaluator)");
static cl::OptionCategory runCategory("run options");
static cl::opt<std::string> runModel(cl::Positional, cl::desc("<model.mlir | compiled dir>"), cl::Required,
                                     cl::sub(runCommand), cl::cat(runCategory));
static cl::opt<std::string> runParams("params", cl::desc("Parameters (.safetensors)"),
                                      cl::value_desc("file"), cl::sub(runCommand),
                                      cl::cat(runCategory));
static cl::list<std::string> runInputs("input", cl::desc("A model input: NAME=FILE.npy (repeatable)"),
                                       cl::value_desc("name=file"), cl::sub(runCommand),
                                       cl::cat(runCategory));
static cl::opt<uint64_t> runMemoryLimit("memory-limit",
                                        cl::desc("Compiled dir: fail a rank whose arena needs more "
                                                 "than this many bytes"),
                                        cl::init(0), cl::sub(runCommand), cl::cat(runCategory));
static cl::opt<double> runTimeout("timeout",
                                  cl::desc("Compiled dir: end the job when a rank's op makes no "
                                           "progress for this many seconds (default 600, at most 1e6)"),
                                  cl::init(600), cl::sub(runCommand), cl::cat(runCategory));
static cl::opt<int64_t> runRepeat("repeat",
                                  cl::desc("Compiled dir: run the program this many times in each "
                                           "rank and time every run (run.json's repeats), for "
                                           "benchmarks"),
                                  cl::init(1), cl::sub(runCommand), cl::cat(runCategory));
static cl::opt<std::string> runProfile("profile",
                                       cl::desc("Compiled dir: ops (time every op: run.json's "
                                                "ranks[].ops, by location and types, each op's "
                                                "seconds on the GPU's clock for CUDA programs, "
                                                "else the host's)"),
                                       cl::value_desc("ops"), cl::sub(runCommand),
                                       cl::cat(runCategory));
static cl::opt<int64_t> runSteps("steps",
                                 cl::desc("Run a training step (compiled with --train) this many "
                                          "times, on the ranks in one launch (a pipeline's, a "
                                          "launch a step): losses.npy and params.safetensors; an "
                                          "input file of shape [S, ...] gives step k its batch k "
                                          "mod S"),
                                 cl::init(0), cl::sub(runCommand), cl::cat(runCategory));
static cl::opt<int64_t>
    runSaveEvery("save-every",
                 cl::desc("With --steps: after every K-th step, the state so far (parameters "
                          "and optimizer states) to <dir>/checkpoint.safetensors, replacing the "
                          "last, to train on from with --params if the run stops"),
                 cl::value_desc("K"), cl::init(0), cl::sub(runCommand), cl::cat(runCategory));
static cl::opt<std::string> runOutputDir("output-dir",
                                         cl::desc("Write every result as <dir>/<name>.npy"),
                                         cl::value_desc("dir"), cl::Required, cl::sub(runCommand),
                                         cl::cat(runCategory));

//===----------------------------------------------------------------------===//
// sbpc compile / sbpc explain
//===----------------------------------------------------------------------===//

static cl::SubCommand compileCommand("compile", "Lay a model out on a device mesh and report why");
static cl::OptionCategory compileCategory("compile options");
static cl::opt<std::string> compileModel(cl::Positional, cl::desc("<model.mlir>"), cl::Required,
                                         cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string> compileMesh("mesh", cl::desc("Device mesh of up to 4 axes, e.g. dp=2,tp=4 (names of letters, digits and _); a first axis pp=N runs N pipeline stages, e.g. pp=2,dp=2"),
                                        cl::value_desc("axes"), cl::Required,
                                        cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string>
    compileStrategy("strategy",
                    cl::desc("auto (search, the default) | drec (MindSpore's D-Rec search) | exact "
                             "(the optimum, small graphs only) | dp | tp | dp-tp (named seeds, "
                             "then propagation) | propagate (only --layout seeds)"),
                    cl::init("auto"), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<bool>
    compileIgnoreMemory("ignore-memory",
                        cl::desc("auto: keep the fastest plan even if it does not fit the "
                                 "cluster's device memory; on a pipeline, cut the stages by "
                                 "time alone"),
                        cl::sub(compileCommand), cl::cat(compileCategory));
static cl::list<std::string>
    compileLayouts("layout", cl::desc("Seed a parameter or input: NAME=[S(0), B] (repeatable)"),
                   cl::value_desc("name=layout"), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string>
    compileCluster("cluster",
                   cl::desc("Cost model: cpu, dgx-h100x8, dgx-h100-cluster or a JSON file "
                            "(default: cpu; with --target cuda, dgx-h100x8 for up to 8 devices, "
                            "else dgx-h100-cluster)"),
                   cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string> compileEmit("emit",
                                        cl::desc("What to write: all (default) or report (report.json only)"),
                                        cl::init("all"), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string>
    compileTarget("target",
                  cl::desc("Also build per-rank executables: cpu (C++ and MPI) or cuda (CUDA "
                           "C++, cuBLAS and NCCL; one GPU per rank), with the runtime's sources "
                           "and build.sh to rebuild them without sbpc. Without it, only the plan "
                           "(report.json, sbp.mlir)"),
                  cl::value_desc("cpu|cuda"), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string>
    compileCudaArch("cuda-arch",
                    cl::desc("--target cuda: the GPU architecture nvcc builds for, as sm_90 (the "
                             "default) or sm_90a; the runtime is built for "
                             "SBPC_CUDA_ARCHITECTURES"),
                    cl::init("sm_90"), cl::value_desc("sm_NN"), cl::sub(compileCommand),
                    cl::cat(compileCategory));
static cl::opt<std::string>
    compilePrecision("precision",
                     cl::desc("f32 (default) or bf16: activations, gradients and collectives "
                              "in bf16, computed with f32 accumulation; parameters, optimizer "
                              "state and updates in f32; files stay f32. The search, boxings "
                              "and report count bf16 at 2 bytes, with --target the programs "
                              "compute so"),
                     cl::init("f32"), cl::value_desc("f32|bf16"), cl::sub(compileCommand),
                     cl::cat(compileCategory));
static cl::opt<bool> compileFusedAttention(
    "fused-attention",
    cl::desc("With --precision bf16: attention's scores, softmax and product by the values as "
             "one op (with --target), and in training their gradients as one more, the scores "
             "never in memory (flash attention on the GPU; heads of an even width up to 128), "
             "nor in the search's and the report's memory estimates. On by default; =false "
             "keeps them apart"),
    cl::init(true), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<bool> compileTiming(
    "timing",
    cl::desc("Print to stderr where the compile's time went: parsing, the training step's "
             "passes, the named strategies the search starts from, each layout pass, the "
             "report, and with --target lowering and each program's emitting and building"),
    cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<bool> compileTrain("train",
                                  cl::desc("Compile one training step: the loss's gradients "
                                           "and an optimizer update of every parameter"),
                                  cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string> compileOptimizer("optimizer", cl::desc("--train: sgd or adamw (default)"),
                                             cl::init("adamw"), cl::sub(compileCommand),
                                             cl::cat(compileCategory));
static cl::opt<double> compileLr("lr", cl::desc("--train: learning rate (default 1e-3)"),
                                 cl::init(1e-3), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<double> compileMomentum("momentum", cl::desc("--train --optimizer sgd: momentum"),
                                       cl::init(0.0), cl::sub(compileCommand),
                                       cl::cat(compileCategory));
static cl::opt<double> compileWeightDecay("weight-decay", cl::desc("--train: weight decay"),
                                          cl::init(0.0), cl::sub(compileCommand),
                                          cl::cat(compileCategory));
static cl::opt<double> compileEps("eps", cl::desc("--train --optimizer adamw: epsilon (default 1e-8)"),
                                  cl::init(1e-8), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<int64_t> compileZero("zero",
                                    cl::desc("--train: ZeRO stage on the data-parallel axes: 0 (none, "
                                             "default), 1 (optimizer states), 2 (+ gradients), 3 "
                                             "(+ parameters)"),
                                    cl::init(0), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<int64_t>
    compileMicroBatches("micro-batches",
                        cl::desc("--train: split the batch into N micro-batches, accumulate their "
                                 "gradients, update once (default 1); the batch must divide into N micro-batches, "
                                 "and each micro-batch's rows over the ranks that split the batch"),
                        cl::init(1), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string> compilePipelineSchedule(
    "pipeline-schedule",
    cl::desc("--mesh pp=N with --micro-batches: 1f1b (default: a stage holds at most N - s "
             "micro-batches' activations) | interleaved (1F1B on --pipeline-chunks chunks a "
             "stage: a smaller bubble; micro-batches a multiple of N) | gpipe (every forward, "
             "then every backward) | sequential (one micro-batch after another); the search's "
             "memory check counts what the first stage holds under it"),
    cl::init("1f1b"), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<int64_t> compilePipelineChunks(
    "pipeline-chunks",
    cl::desc("--pipeline-schedule interleaved: model chunks each stage holds, stage s chunks s, "
             "s + N, ... (default 2)"),
    cl::init(2), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::list<std::string> compilePipelineStarts(
    "pipeline-starts",
    cl::desc("--mesh pp=N: place the stages by hand: the blocks (graph.region, e.g. h.6) that "
             "begin stages 1..N-1, in order, comma-separated"),
    cl::CommaSeparated, cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string>
    compileRecompute("recompute",
                     cl::desc("--train: none (default) | full (recompute each marked block's "
                              "activations in backward) | selective (only the attention core's)"),
                     cl::init("none"), cl::sub(compileCommand), cl::cat(compileCategory));
static cl::opt<std::string> compileOutput("o", cl::desc("Output directory"), cl::value_desc("dir"),
                                          cl::Required, cl::sub(compileCommand),
                                          cl::cat(compileCategory));

static cl::SubCommand explainCommand("explain", "Print a report.json for a person");
static cl::opt<std::string> explainReport(cl::Positional, cl::desc("<report.json>"), cl::Required,
                                          cl::sub(explainCommand));

static mlir::LogicalResult runRunCommand(MLIRContext &ctx) {
  bool compiled = llvm::sys::fs::is_directory(runModel.getValue());
  if (runRepeat.getNumOccurrences() && (runRepeat < 1 || runSteps.getNumOccurrences() || !compiled))
    return sbpc::reportError(runRepeat < 1 ? "--repeat must be at least 1, got " +
                                                 std::to_string(runRepeat)
                                           : std::string("--repeat applies to a compiled "
                                                         "directory, without --steps"));
  if (runProfile.getNumOccurrences() && (runProfile != "ops" || runSteps.getNumOccurrences() ||
                                         !compiled))
    return sbpc::reportError(runProfile != "ops"
                                 ? "--profile must be ops, got '" + runProfile + "'"
                                 : std::string("--profile applies to a compiled directory, "
                                               "without --steps"));
  // The ranks' limits: the reference evaluator has neither.
  if (!compiled && (runMemoryLimit.getNumOccurrences() || runTimeout.getNumOccurrences()))
    return sbpc::reportError(std::string(runTimeout.getNumOccurrences() ? "--timeout"
                                                                        : "--memory-limit") +
                             " applies to a compiled directory");
  // At most 11.6 days: seconds the ranks' watchdog counts in int64 nanoseconds.
  if (!(runTimeout > 0 && runTimeout <= 1e6)) {
    std::ostringstream text;
    text << runTimeout;
    return sbpc::reportError("--timeout must be a number of seconds in (0, 1000000], got " +
                             text.str());
  }
  if (runSaveEvery.getNumOccurrences() && (runSaveEvery < 1 || !runSteps.getNumOccurrences()))
    return sbpc::reportError(runSaveEvery < 1 ? "--save-every must be at least 1, got " +
                                                    std::to_string(runSaveEvery)
                                              : std::string("--save-every needs --steps"));
  if (runSteps.getNumOccurrences())
    return sbpc::runTraining(ctx, {runModel, runParams, runInputs, runOutputDir, runSteps,
                                   runMemoryLimit, runTimeout, runSaveEvery});
  if (compiled)
    return sbpc::runCompiled({runModel, runParams, runInputs, runOutputDir, runMemoryLimit,
                              runTimeout, /*quiet=*/false, runRepeat,
                              runProfile.getNumOccurrences() > 0});
  return sbpc::runReference(ctx, {runModel, runParams, runInputs, runOutputDir});
}

static mlir::LogicalResult runCompileCommand(MLIRContext &ctx) {
  if (compileEmit != "all" && compileEmit != "report")
    return sbpc::reportError("--emit must be all or report, got '" + compileEmit + "'");
  if ((compileTarget.getNumOccurrences() || !compileTarget.empty()) && compileTarget != "cpu" &&
      compileTarget != "cuda")
    return sbpc::reportError("--target must be cpu or cuda, got '" + compileTarget + "'");
  // sm_NN, or sm_NNa / sm_NNf (nvcc's architecture- and family-specific
  // variants, as sm_90a).
  llvm::StringRef arch = compileCudaArch.getValue();
  bool archOk = arch.consume_front("sm_");
  if (arch.ends_with("a") || arch.ends_with("f"))
    arch = arch.drop_back();
  if (!archOk || arch.empty() || arch.find_first_not_of("0123456789") != llvm::StringRef::npos)
    return sbpc::reportError("--cuda-arch must be sm_ and a number, as sm_90 or sm_90a, got '" +
                             compileCudaArch + "'");
  if (compileCudaArch.getNumOccurrences() && compileTarget != "cuda")
    return sbpc::reportError("--cuda-arch applies to --target cuda");
  if (compilePrecision != "f32" && compilePrecision != "bf16")
    return sbpc::reportError("--precision must be f32 or bf16, got '" + compilePrecision + "'");
  if (compileFusedAttention.getNumOccurrences() && compilePrecision != "bf16")
    return sbpc::reportError("--fused-attention applies to --precision bf16");
  if (compileOptimizer != "sgd" && compileOptimizer != "adamw")
    return sbpc::reportError("--optimizer must be sgd or adamw, got '" + compileOptimizer + "'");
  if (compileZero < 0 || compileZero > 3)
    return sbpc::reportError("--zero must be 0, 1, 2 or 3, got " + std::to_string(compileZero));
  if (compileMicroBatches < 1)
    return sbpc::reportError("--micro-batches must be at least 1, got " +
                             std::to_string(compileMicroBatches));
  if (compileRecompute != "none" && compileRecompute != "full" && compileRecompute != "selective")
    return sbpc::reportError("--recompute must be none, full or selective, got '" +
                             compileRecompute + "'");
  if (!sbpc::sbp::isPipelineSchedule(compilePipelineSchedule))
    return sbpc::reportError("--pipeline-schedule must be " +
                             std::string(sbpc::sbp::kPipelineSchedules) + ", got '" +
                             compilePipelineSchedule + "'");
  // The pipeline's flags need a pipeline (a bad --mesh is reported later).
  std::string meshError;
  std::optional<sbprt::Mesh> mesh = sbpc::parseMesh(compileMesh, meshError);
  bool pipelined = !mesh || (!mesh->axes.empty() && mesh->axes.front() == sbprt::kPipelineAxis &&
                             mesh->shape.front() > 1);
  for (const cl::Option *flag : {static_cast<const cl::Option *>(&compilePipelineSchedule),
                                 static_cast<const cl::Option *>(std::addressof(compilePipelineStarts))})
    if (flag->getNumOccurrences() && !pipelined)
      return sbpc::reportError(
          "--" + flag->ArgStr.str() +
          " applies to a mesh whose first axis is pp, of 2 or more stages (e.g. --mesh pp=2,dp=2)");
  if (compilePipelineChunks.getNumOccurrences() && compilePipelineSchedule != "interleaved")
    return sbpc::reportError("--pipeline-chunks applies to --pipeline-schedule interleaved");
  if (compilePipelineSchedule.getNumOccurrences()) {
    if (compileMicroBatches == 1)
      return sbpc::reportError(
          compileMicroBatches.getNumOccurrences()
              ? "--pipeline-schedule orders micro-batches: --micro-batches must be 2 or more"
              : "--pipeline-schedule orders micro-batches: add --train --micro-batches N");
  }
  if (!compileTrain && (compileZero || compileMicroBatches != 1 || compileRecompute != "none"))
    return sbpc::reportError("--zero, --micro-batches and --recompute apply to a training step: "
                             "add --train");
  // The optimizer's settings: each only where it is used, in its range.
  struct Setting {
    const cl::opt<double> &flag;
    const char *name;      // the graph.*_update attribute
    const char *optimizer; // the optimizer that uses it, or nullptr for both
  };
  for (const Setting &s : {Setting{compileLr, "lr", nullptr},
                           Setting{compileWeightDecay, "weight_decay", nullptr},
                           Setting{compileMomentum, "momentum", "sgd"},
                           Setting{compileEps, "eps", "adamw"}}) {
    std::string flag = "--" + s.flag.ArgStr.str();
    if (s.flag.getNumOccurrences() && !compileTrain)
      return sbpc::reportError(flag + " applies to a training step: add --train");
    if (s.flag.getNumOccurrences() && s.optimizer && compileOptimizer != s.optimizer)
      return sbpc::reportError(flag + " applies to --optimizer " + s.optimizer + ", not " +
                               compileOptimizer);
    if (std::string problem = sbpc::graph::hyperparameterProblem(s.name, s.flag); !problem.empty())
      return sbpc::reportError(flag + " " + problem);
  }
  if (compileOptimizer.getNumOccurrences() && !compileTrain)
    return sbpc::reportError("--optimizer applies to a training step: add --train");
  return sbpc::runCompile(
      ctx, {compileModel,
            compileMesh,
            compileStrategy,
            compileLayouts,
            compileCluster,
            compileOutput,
            compileEmit == "report",
            compileIgnoreMemory,
            compileTarget,
            compileTrain,
            compileOptimizer,
            compileLr,
            compileMomentum,
            compileWeightDecay,
            compileEps,
            compileZero,
            compileMicroBatches,
            compileRecompute,
            compileCudaArch,
            compilePrecision,
            compileFusedAttention,
            compileTiming,
            compilePipelineSchedule,
            {compilePipelineStarts.begin(), compilePipelineStarts.end()},
            compilePipelineSchedule == "interleaved" ? compilePipelineChunks : int64_t{1}});
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "sbpc (development build), with MLIR " << LLVM_VERSION_STRING << "\n";
  });
  cl::HideUnrelatedOptions({&genCategory, &runCategory, &compileCategory});
  cl::ParseCommandLineOptions(argc, argv,
                              "sbpc: automatic parallelization of deep-learning graphs\n\n"
                              "  sbpc gen gpt|mlp [options] -o model.mlir [--params p.safetensors]\n"
                              "  sbpc compile model.mlir --mesh dp=2,tp=2 [--strategy auto] "
                              "[--target cpu|cuda] -o DIR\n"
                              "  sbpc run DIR|model.mlir --params p.safetensors --input NAME=FILE.npy "
                              "--output-dir RES\n"
                              "  sbpc explain DIR/report.json\n");
  // An option of one value given twice would silently keep the last.
  for (cl::SubCommand *sub : {&genCommand, &runCommand, &compileCommand, &explainCommand})
    if (*sub)
      for (auto &entry : sub->OptionsMap) {
        cl::Option *option = entry.getValue();
        if (option->getNumOccurrences() > 1 &&
            (option->getNumOccurrencesFlag() == cl::Optional ||
             option->getNumOccurrencesFlag() == cl::Required) &&
            !option->isPositional()) {
          (void)sbpc::reportError(flagName(*option) + " given " +
                                  std::to_string(option->getNumOccurrences()) +
                                  " times; give it once");
          return 1;
        }
      }
  // A file, directory or choice given as '' would be read as "not given",
  // or as a nameless path.
  for (cl::opt<std::string> *option :
       {&genOutput, &genParams, &runParams, &runOutputDir, &compileOutput, &compileCluster,
        &compileMesh})
    if (option->getNumOccurrences() && option->getValue().empty()) {
      (void)sbpc::reportError(flagName(*option) + " is empty");
      return 1;
    }
  DialectRegistry registry;
  sbpc::registerGraphSbpModels(registry);
  MLIRContext ctx(registry);
  // Diagnostics are one line each; the op dump belongs in sbpc-opt, not here.
  ctx.printOpOnDiagnostic(false);
  ctx.loadDialect<sbpc::graph::GraphDialect, sbpc::sbp::SbpDialect, func::FuncDialect>();
  sbpc::OneLineDiagnostics diagnostics(&ctx);
  LogicalResult result = failure();
  if (genCommand)
    result = runGenCommand(ctx);
  else if (runCommand)
    result = runRunCommand(ctx);
  else if (compileCommand)
    result = runCompileCommand(ctx);
  else if (explainCommand)
    result = sbpc::runExplain(explainReport);
  else
    result = sbpc::reportError("expected a command: gen, run, compile or explain (see sbpc --help)");
  return succeeded(result) ? 0 : 1;
}
