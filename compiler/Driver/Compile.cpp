// `sbpc compile`: seeds from a strategy and --layout, then propagation and
// boxing, then report.json.
#include "compiler/Driver/Compile.h"

#include "compiler/Driver/Commands.h"
#include "compiler/Report/Report.h"
#include "compiler/Sbp/Strategies.h"
#include "compiler/Sbp/ValueLayouts.h"
#include "compiler/Support/ArgAttrs.h"
#include "compiler/Support/Diagnostics.h"
#include "compiler/Support/Paths.h"
#include "compiler/Target/Target.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "passes/Graph/Passes.h"
#include "passes/Sbp/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/IR/Threading.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <set>

using namespace mlir;
using namespace sbpc;

namespace {

/// Parses the layout of "NAME=[S(0), B]" with the sbp dialect's own
/// grammar; a one-line error names the flag otherwise.
FailureOr<std::pair<std::string, sbprt::NdSbp>> parseLayoutFlag(MLIRContext &ctx,
                                                                 const std::string &flag) {
  auto [name, text] = llvm::StringRef(flag).split('=');
  const std::string form = "--layout '" + flag + "' must be NAME=[SBP, ...], e.g. tokens=[S(0), B]";
  if (name.empty() || text.empty())
    return reportError(form);
  std::string problem;
  Attribute attr;
  {
    ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &diag) {
      if (problem.empty())
        problem = diag.str();
      return success();
    });
    attr = parseAttribute(("#sbp.nd<" + text + ">").str(), &ctx);
  }
  auto layout = dyn_cast_or_null<sbp::NdSbpAttr>(attr);
  // The dialect's own words on an entry; the generic parser's (an
  // "expected '>'" from the text it was wrapped in) say less than the form.
  llvm::StringRef said = problem;
  if (!layout)
    return reportError(said.starts_with("unknown ") || said.starts_with("split dimension") ||
                               said.starts_with("an nd-SBP")
                           ? "--layout '" + flag + "': " + problem
                           : form);
  return std::make_pair(name.str(), layout.toLayout());
}

/// What a named strategy gave a model: for each op of its function, in
/// order, [operand layouts, result layouts] (null where it gave none), and
/// for each argument its layout (null where none); `laidOut` false when
/// the strategy fails on the model.
struct StrategyLayout {
  const char *name;
  Seeds seeds;
  bool laidOut = false;
  std::vector<Attribute> ops, arguments;
};

/// Lays out a copy of `module` by `strategy`'s seeds and propagation, and
/// records what it gave each op and argument of the model. Touches nothing
/// but its copy: the strategies run concurrently.
void layOutByStrategy(ModuleOp module, const ModelSignature &model, const sbprt::Mesh &mesh,
                      const std::string &cluster, StrategyLayout &strategy,
                      TimingScope &parent) {
  MLIRContext *ctx = module.getContext();
  func::FuncOp modelFn = model.func;
  TimingScope timing = parent.nest(strategy.name);
  TimingScope copying = timing.nest("copy");
  OwningOpRef<ModuleOp> copy = module.clone();
  auto fn = copy->lookupSymbol<func::FuncOp>(modelFn.getSymName());
  auto meshOp = *copy->getOps<sbp::MeshOp>().begin();
  bool seeded = true;
  ArgAttrEdits copyAttrs(fn);
  for (const ModelArgument &given : model.arguments) {
    unsigned number = given.value.getArgNumber();
    auto seed = strategy.seeds.arguments.find(given.name);
    if (seed == strategy.seeds.arguments.end() || copyAttrs.get(number, sbp::kArgLayout))
      continue; // the user's --layout seeds stay
    seeded &= sbp::checkValueLayout(mesh, seed->second, fn.getArgument(number)).empty();
    copyAttrs.set(number, sbp::kArgLayout, sbp::NdSbpAttr::get(ctx, seed->second));
  }
  copyAttrs.apply();
  copying.stop();
  if (!seeded)
    return;
  if (strategy.seeds.residualStream)
    pinResidualStream(fn, meshOp, *strategy.seeds.residualStream);
  {
    TimingScope propagating = timing.nest("propagate");
    PassManager pm(ctx);
    pm.enableVerifier(false); // a scratch copy: only its layouts are read
    sbp::SbpPropagateOptions propagate;
    propagate.cluster = cluster;
    pm.addPass(sbp::createSbpPropagate(propagate));
    if (failed(pm.run(*copy)))
      return;
  }
  // The copy's ops in the model's order, less the pins the strategy added.
  TimingScope recording = timing.nest("record");
  Block &laidOut = fn.getBody().front();
  auto next = laidOut.begin();
  for (Operation &op : modelFn.getBody().front().without_terminator()) {
    while (next != laidOut.end() && isa<sbp::ConstraintOp>(*next) && !isa<sbp::ConstraintOp>(op))
      ++next;
    if (next == laidOut.end() || next->getName() != op.getName())
      return;
    auto operands = next->getAttrOfType<ArrayAttr>(sbp::kOperandLayouts);
    auto results = next->getAttrOfType<ArrayAttr>(sbp::kResultLayouts);
    strategy.ops.push_back(operands && results ? ArrayAttr::get(ctx, {operands, results})
                                               : Attribute());
    ++next;
  }
  for (BlockArgument arg : modelFn.getArguments())
    strategy.arguments.push_back(fn.getArgAttr(arg.getArgNumber(), sbp::kArgLayout));
  strategy.laidOut = true;
  recording.stop();
  TimingScope discarding = timing.nest("discard the copy");
  copy = nullptr;
}

/// `name` -> each laid-out strategy's `entry(strategy)`, or null if none has one.
DictionaryAttr startsOf(MLIRContext *ctx, const std::vector<StrategyLayout> &strategies,
                        llvm::function_ref<Attribute(const StrategyLayout &)> entry) {
  NamedAttrList starts;
  for (const StrategyLayout &strategy : strategies)
    if (strategy.laidOut)
      if (Attribute value = entry(strategy))
        starts.append(strategy.name, value);
  return starts.empty() ? DictionaryAttr() : starts.getDictionary(ctx);
}

/// For --strategy auto on a training step: lays out a copy of `module` by each named strategy
/// that applies to the mesh (its seeds, then propagation; the strategies
/// concurrently, each on its own copy) and marks what
/// each gave every op and free argument of the model (sbp::kStarts), for
/// the search to start from. A strategy that fails on the model is left
/// out, silently: the search does not need it.
void markStrategyStarts(ModuleOp module, const ModelSignature &model, const sbprt::Mesh &mesh,
                        const std::string &cluster, TimingScope &timing) {
  MLIRContext *ctx = module.getContext();
  func::FuncOp modelFn = model.func;
  std::vector<StrategyLayout> strategies;
  for (const char *name : {"dp", "dp-tp", "tp"}) {
    std::string error;
    if (std::optional<Seeds> seeds = strategySeeds(name, model, mesh, error))
      strategies.push_back({name, std::move(*seeds)});
  }
  {
    // A pass manager's run adds its passes' dialects to the context's
    // registry, unless they are there: put them there before the threads.
    DialectRegistry dialects;
    sbp::createSbpPropagate()->getDependentDialects(dialects);
    ctx->appendDialectRegistry(dialects);
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    parallelFor(ctx, 0, strategies.size(), [&](size_t i) {
      layOutByStrategy(module, model, mesh, cluster, strategies[i], timing);
    });
  }
#ifdef __GLIBC__
  // The copies were freed in the pool's threads, whose malloc arenas the
  // rest of the compile does not reuse: give their pages back.
  malloc_trim(0);
#endif
  TimingScope marking = timing.nest("mark");
  size_t i = 0;
  for (Operation &op : modelFn.getBody().front().without_terminator()) {
    if (DictionaryAttr starts =
            startsOf(ctx, strategies, [&](const StrategyLayout &s) { return s.ops[i]; }))
      op.setAttr(sbp::kStarts, starts);
    ++i;
  }
  ArgAttrEdits marks(modelFn);
  for (BlockArgument arg : modelFn.getArguments())
    if (DictionaryAttr starts = startsOf(ctx, strategies, [&](const StrategyLayout &s) {
          return s.arguments[arg.getArgNumber()];
        }))
      marks.set(arg.getArgNumber(), sbp::kStarts, starts);
  marks.apply();
}

/// Why an input's seed cannot hold within each of `microBatches`
/// micro-batches, or empty. Micro-batch i takes rows i, i+N, ... of every
/// input (--sbp-micro-batches), so the ranks that split the batch split
/// each micro-batch's rows too: those must divide, or every micro-batch is
/// gathered and the data parallelism asked for is lost.
std::string microBatchProblem(const sbprt::Mesh &mesh, const sbprt::NdSbp &layout,
                              const ModelArgument &arg, int64_t microBatches) {
  if (arg.kind != ModelArgument::Kind::Input || microBatches < 2 || arg.type().getRank() == 0)
    return "";
  int64_t rows = arg.type().getDimSize(0), ranks = 1;
  for (auto [axis, sbp] : llvm::enumerate(layout))
    if (sbp.isSplit() && sbp.dim == 0)
      ranks *= mesh.shape[axis];
  if (ranks == 1 || rows % microBatches != 0 || (rows / microBatches) % ranks == 0)
    return "";
  return "each micro-batch's " + std::to_string(rows / microBatches) +
         " rows do not split over the " + std::to_string(ranks) +
         " ranks that split its dimension 0 (a batch of a multiple of " +
         std::to_string(microBatches * ranks) + " would, or fewer micro-batches)";
}

/// The passes' result verified once, not after each pass: a step of many
/// micro-batches has hundreds of thousands of ops, and each verification
/// walks them all (sbpc-opt still verifies after every pass).
LogicalResult verifyOnce(ModuleOp module, TimingScope &timing) {
  TimingScope verifying = timing.nest("verify");
  return mlir::verify(module);
}

LogicalResult writeFile(const std::string &path, llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file)
    return reportError(path + ": " + error);
  write(file->os());
  file->keep();
  return success();
}

} // namespace

/// One compile, whose search keeps plans to `memoryShare` of the device by
/// its estimate. Where `retryShare` is given and the search's plan, cut
/// into pipeline stages, does not fit the device after all, returns before
/// writing anything with `*retryShare` set: the share at which the search
/// should look again.
static LogicalResult compileOnce(MLIRContext &ctx, const CompileCommand &given, double memoryShare,
                                 std::optional<double> *retryShare) {
  std::string error;
  std::optional<sbprt::Mesh> mesh = parseMesh(given.mesh, error);
  if (!mesh)
    return reportError(error);
  CompileCommand command = given;
  if (failed(refuseOverwritingInputs("-o", command.outputDir,
                                     {"report.json", "sbp.mlir", "exec.mlir", "program.json",
                                      "launch.sh", "build.sh", "build.log", "src/", "bin/",
                                      "runtime/", "include/"},
                                     {command.modelPath, command.cluster})))
    return failure();
  if (!command.reportOnly && !command.target.empty())
    if (std::string clash = runtimeSourcesClash(command.outputDir); !clash.empty())
      return reportError("-o: " + clash);
  if (command.cluster.empty())
    command.cluster = defaultCluster(command.target, mesh->numDevices());
  std::optional<Cluster> cluster = loadCluster(command.cluster, error);
  if (!cluster)
    return reportError("--cluster: " + error);
  if (cluster->devices && mesh->numDevices() > cluster->devices)
    return reportError("--mesh " + command.mesh + " has " + std::to_string(mesh->numDevices()) +
                       " devices but cluster " + cluster->name + " has " +
                       std::to_string(cluster->devices));
  // A first axis named pp is the pipeline's: its coordinates are the
  // stages, and every stage lays the model out on the rest of the mesh (on
  // one device where nothing is left).
  const int64_t devices = mesh->numDevices();
  int64_t stages = 1;
  if (auto pp = llvm::find(mesh->axes, sbp::kPipelineAxis.str()); pp != mesh->axes.end()) {
    if (pp != mesh->axes.begin())
      return reportError("--mesh " + command.mesh + ": the pipeline axis '" +
                         sbp::kPipelineAxis.str() + "' must come first (e.g. pp=2,dp=2,tp=2)");
    stages = mesh->shape.front();
    if (stages > 1 && command.microBatches > 1)
      if (std::string error = sbp::pipelineScheduleError(
              command.pipelineSchedule, stages, command.pipelineChunks, command.microBatches);
          !error.empty())
        return reportError("--pipeline-schedule " + command.pipelineSchedule + ": " + error);
    int64_t parts = stages * command.pipelineChunks;
    std::string part = command.pipelineChunks > 1 ? "chunk" : "stage";
    if (!command.pipelineStarts.empty() &&
        static_cast<int64_t>(command.pipelineStarts.size()) != parts - 1)
      return reportError(
          "--pipeline-starts names " + std::to_string(command.pipelineStarts.size()) + " block" +
          (command.pipelineStarts.size() == 1 ? "" : "s") + " for " + std::to_string(parts) + " " +
          part + "s: one per " + part + " after the first (" + std::to_string(parts - 1) + ")");
    mesh->axes.erase(mesh->axes.begin());
    mesh->shape.erase(mesh->shape.begin());
    if (mesh->axes.empty()) {
      mesh->axes = {"dp"};
      mesh->shape = {1};
    }
  }
  // --timing: a tree of where the time went, printed to stderr when the
  // compile returns.
  DefaultTimingManager timingManager;
  timingManager.setEnabled(command.timing);
  timingManager.setDisplayMode(DefaultTimingManager::DisplayMode::Tree);
  TimingScope timing = timingManager.getRootScope();
  TimingScope parsing = timing.nest("parse the model");
  OwningOpRef<ModuleOp> module = parseModelFile(command.modelPath, ctx);
  if (!module)
    return failure();
  parsing.stop();
  if (command.train) {
    TimingScope training = timing.nest("training step");
    PassManager train(&ctx);
    train.enableTiming(training);
    train.enableVerifier(false); // verified once, after it (verifyOnce)
    graph::GraphAutodiffOptions autodiff;
    autodiff.recompute = command.recompute;
    train.addPass(graph::createGraphAutodiff(autodiff));
    sbp::SbpMicroBatchesOptions microBatches;
    microBatches.count = command.microBatches;
    train.addPass(sbp::createSbpMicroBatches(microBatches));
    graph::GraphOptimizerOptions optimizer;
    optimizer.optimizer = command.optimizer;
    optimizer.lr = command.lr;
    optimizer.momentum = command.momentum;
    optimizer.weightDecay = command.weightDecay;
    optimizer.eps = command.eps;
    train.addPass(graph::createGraphOptimizer(optimizer));
    if (failed(train.run(*module)) || failed(verifyOnce(*module, training)))
      return failure();
  }
  if (auto meshes = module->getOps<sbp::MeshOp>(); !meshes.empty())
    return (*meshes.begin()).emitError() << "the model already declares a mesh; sbpc compile lays it out "
                                   "on --mesh (use sbpc-opt --sbp-propagate for a model with its own)";
  FailureOr<ModelSignature> model = getModelSignature(*module);
  if (failed(model))
    return failure();
  std::optional<Seeds> seeds = strategySeeds(command.strategy, *model, *mesh, error);
  if (!seeds)
    return reportError(error);
  std::set<std::string> seeded;
  for (const std::string &flag : command.layouts) {
    FailureOr<std::pair<std::string, sbprt::NdSbp>> layout = parseLayoutFlag(ctx, flag);
    if (failed(layout))
      return failure();
    if (!seeded.insert(layout->first).second)
      return reportError("--layout '" + flag + "': '" + layout->first + "' is laid out twice");
    if (llvm::none_of(model->arguments,
                      [&](const ModelArgument &a) { return a.name == layout->first; }))
      return reportError("--layout '" + flag + "': the model has no parameter or input named '" +
                         layout->first + "'");
    seeds->arguments[layout->first] = layout->second;
  }

  // The mesh, then every seed on its argument, checked against its shape.
  OpBuilder b(&ctx);
  b.setInsertionPointToStart(module->getBody());
  SmallVector<StringRef> axisNames(mesh->axes.begin(), mesh->axes.end());
  auto meshOp = b.create<sbp::MeshOp>(module->getLoc(), "mesh", b.getStrArrayAttr(axisNames),
                                      b.getDenseI64ArrayAttr(mesh->shape));
  ArgAttrEdits seedAttrs(model->func);
  for (const ModelArgument &arg : model->arguments) {
    auto seed = seeds->arguments.find(arg.name);
    if (seed == seeds->arguments.end())
      continue;
    std::string problem = sbp::checkValueLayout(*mesh, seed->second, arg.value);
    if (!problem.empty())
      return emitError(arg.value.getLoc())
             << (arg.kind == ModelArgument::Kind::Param ? "parameter '" : "input '") << arg.name
             << "' " << graph::formatShape(arg.type().getShape()) << " laid out "
             << sbprt::toString(seed->second) << " on mesh " << command.mesh << ": " << problem;
    if (std::string micro = microBatchProblem(*mesh, seed->second, arg, command.microBatches);
        !micro.empty())
      return emitError(arg.value.getLoc())
             << "input '" << arg.name << "' " << graph::formatShape(arg.type().getShape())
             << " laid out " << sbprt::toString(seed->second) << " on mesh " << command.mesh
             << " with --micro-batches " << command.microBatches << ": " << micro;
    seedAttrs.set(arg.value.getArgNumber(), sbp::kArgLayout, sbp::NdSbpAttr::get(&ctx, seed->second));
  }
  seedAttrs.apply();
  if (seeds->residualStream)
    pinResidualStream(model->func, meshOp, *seeds->residualStream);

  // Under bf16 the boxings and costs count 2-byte elements where the
  // programs will hold them, and the memory estimates leave out what flash
  // attention never stores (sbp::ElementSizes).
  if (command.precision == "bf16") {
    (*module)->setAttr(sbp::kModulePrecision, b.getStringAttr("bf16"));
    if (command.fusedAttention)
      (*module)->setAttr(sbp::kModuleFusedAttention, b.getUnitAttr());
  }

  // The search or propagation chooses every signature, ZeRO splits the
  // updates of a training step, boxing makes every change explicit.
  PassManager pm(&ctx);
  auto start = std::chrono::steady_clock::now();
  // On a training step each mesh axis is too wide to solve exactly
  // (docs/search.md), and auto's local search can miss a plan as regular
  // as a named strategy's; on a forward graph the exact per-axis solves
  // find those or better, and laying them out would cost up to a second.
  const bool startFromStrategies = command.strategy == "auto" && command.train;
  double startsSeconds = 0;
  if (isSearchStrategy(command.strategy)) {
    if (startFromStrategies) {
      auto marking = std::chrono::steady_clock::now();
      TimingScope starting = timing.nest("named strategies to start the search from");
      markStrategyStarts(*module, *model, *mesh, command.cluster, starting);
      starting.stop();
      startsSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - marking).count();
    }
    sbp::SbpSearchOptions search;
    search.algorithm = command.strategy;
    search.cluster = command.cluster;
    search.memoryCheck = !command.ignoreMemory;
    search.zero = command.train ? command.zero : 0;
    search.stages = stages;
    search.schedule = command.pipelineSchedule;
    search.chunks = command.pipelineChunks;
    search.starts = command.pipelineStarts;
    search.memoryShare = memoryShare;
    pm.addPass(sbp::createSbpSearch(search));
  } else {
    sbp::SbpPropagateOptions propagate;
    propagate.cluster = command.cluster;
    pm.addPass(sbp::createSbpPropagate(propagate));
  }
  if (command.train) {
    sbp::SbpZeroOptions zero;
    zero.stage = command.zero;
    zero.cluster = command.cluster;
    pm.addPass(sbp::createSbpZero(zero));
  }
  sbp::SbpInsertBoxingOptions boxing;
  boxing.cluster = command.cluster;
  pm.addPass(sbp::createSbpInsertBoxing(boxing));
  if (stages > 1) {
    sbp::SbpPipelineStagesOptions pipeline;
    pipeline.stages = stages;
    pipeline.schedule = command.pipelineSchedule;
    pipeline.chunks = command.pipelineChunks;
    pipeline.starts = command.pipelineStarts;
    pipeline.cluster = command.cluster;
    pipeline.balanceMemory = !command.ignoreMemory;
    pm.addPass(sbp::createSbpPipelineStages(pipeline));
  }
  TimingScope layingOut = timing.nest("lay out");
  pm.enableTiming(layingOut);
  pm.enableVerifier(false);
  if (failed(pm.run(*module)) || failed(verifyOnce(*module, layingOut)))
    return failure();
  layingOut.stop();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (std::error_code ec = llvm::sys::fs::create_directories(command.outputDir))
    return reportError(command.outputDir + ": cannot create: " + ec.message());
  // A previous compile's results go first: one that fails from here leaves
  // only what it wrote, never a runnable mix of two plans.
  for (const char *stale : {"report.json", "program.json", "launch.sh", "exec.mlir"})
    llvm::sys::fs::remove(joinPath(command.outputDir, stale));
  llvm::sys::fs::remove_directories(joinPath(command.outputDir, "bin"));
  ReportInputs inputs{llvm::sys::path::filename(command.modelPath).str(),
                      command.mesh,
                      *cluster,
                      command.strategy,
                      std::string(isSearchStrategy(command.strategy) ? "search" : "named strategy") +
                          (command.layouts.empty() ? "" : " with --layout seeds"),
                      isSearchStrategy(command.strategy) ? command.strategy : "propagate",
                      seconds};
  TimingScope reporting = timing.nest("report");
  nlohmann::json report = buildReport(*module, inputs);
  reporting.stop();
  // The search estimates a pipeline's stages before they exist; where its
  // plan, as cut, does not fit after all, it looks again once, keeping to
  // the share of the device its estimate bore to the stage's need.
  if (retryShare && stages > 1 && command.strategy == "auto" && !command.ignoreMemory &&
      report["totals"].value("fits_device_memory", true) == false) {
    double needs = report["totals"].value("peak_memory_bytes", 0.0);
    double estimated = report["search"].value("memory_bytes_per_rank", 0.0);
    if (needs > 0 && estimated > 0 && estimated < needs) {
      *retryShare = std::min(memoryShare, estimated / needs);
      llvm::errs() << "sbpc: the plan's fullest pipeline stage as cut needs " << bytesText(needs)
                   << ", over the " << bytesText(cluster->memoryBytes)
                   << " of a device (the search "
                   << "estimated " << bytesText(estimated) << "): searching again for plans "
                   << "within " << static_cast<int>(**retryShare * 100) << "% of it\n";
      return success();
    }
  }
  if (startFromStrategies) {
    // Laying the named strategies out to start from is part of the search.
    nlohmann::json &search = report["search"];
    search["starts_seconds"] = startsSeconds;
    search["search_seconds"] = search.value("search_seconds", 0.0) + startsSeconds;
  }
  report["precision"] = command.precision;
  llvm::SmallString<256> reportPath(command.outputDir), modelPath(command.outputDir);
  llvm::sys::path::append(reportPath, "report.json");
  llvm::sys::path::append(modelPath, "sbp.mlir");
  TimingScope writing = timing.nest("write sbp.mlir");
  if (!command.reportOnly &&
      failed(writeFile(modelPath.str().str(), [&](llvm::raw_ostream &os) { module->print(os); })))
    return failure();
  writing.stop();
  if (!command.reportOnly && !command.target.empty()) {
    TargetOptions target;
    target.kind = command.target == "cuda" ? TargetKind::Cuda : TargetKind::Cpu;
    target.cudaArch = command.cudaArch;
    target.bf16 = command.precision == "bf16";
    target.fusedAttention = command.fusedAttention;
    target.timing = &timing;
    if (failed(buildTarget(*module, command.cluster, target, command.outputDir, report)))
      return failure();
  }
  if (failed(writeFile(reportPath.str().str(),
                       [&](llvm::raw_ostream &os) { os << report.dump(2) << "\n"; })))
    return failure();
  llvm::outs() << "wrote " << reportPath << "\n";
  // A plan over the device's memory is written (a strategy by name, a cut
  // by hand, --ignore-memory, or a search whose estimate missed), but not
  // in silence.
  const nlohmann::json &totals = report["totals"];
  if (totals.value("fits_device_memory", true) == false) {
    llvm::errs() << "sbpc: warning: the plan needs "
                 << bytesText(totals.value("peak_memory_bytes", 0.0)) << " per rank at its peak";
    if (totals.contains("peak_memory") && totals["peak_memory"].contains("stage"))
      llvm::errs() << " (pipeline stage " << totals["peak_memory"]["stage"].get<int64_t>() << ")";
    llvm::errs() << ", over the " << bytesText(cluster->memoryBytes) << " of a device of cluster "
                 << cluster->name << ": it does not fit (sbpc explain " << reportPath
                 << " says what it holds)\n";
  }
  if (!command.reportOnly && !command.target.empty())
    llvm::outs() << "wrote " << command.outputDir << "/bin/rank0"
                 << (devices > 1 ? ".." + std::to_string(devices - 1) : "")
                 << " and launch.sh; run them with: sbpc run " << command.outputDir
                 << (llvm::any_of(model->arguments,
                                  [](const ModelArgument &a) {
                                    return a.kind == ModelArgument::Kind::Param;
                                  })
                         ? " --params FILE.safetensors"
                         : "")
                 << " --input NAME=FILE.npy --output-dir DIR\n";
  return success();
}

LogicalResult sbpc::runCompile(MLIRContext &ctx, const CompileCommand &command) {
  std::optional<double> retryShare;
  if (failed(compileOnce(ctx, command, 1.0, &retryShare)))
    return failure();
  return retryShare ? compileOnce(ctx, command, *retryShare, nullptr) : success();
}
