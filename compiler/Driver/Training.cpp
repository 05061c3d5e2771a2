// `sbpc run --steps N`: a training-step program run N times, on one CPU
// (the reference evaluator) or on its ranks, the same loop for both.
#include "compiler/Driver/Commands.h"

#include "compiler/Model/ModelSignature.h"
#include "compiler/Support/Diagnostics.h"
#include "compiler/Support/Paths.h"
#include "runtime/io/Npy.h"
#include "runtime/io/Safetensors.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

using namespace mlir;
using sbpc::absolutePath;
using sbpc::joinPath;
using sbpc::reportError;

namespace {

/// A parameter of the step program: its name, the shape in the file and
/// its element type.
struct StateEntry {
  std::string name;
  std::vector<int64_t> shape;
  sbprt::DType dtype;
};

/// The parameters a step program loads, the shape of each input and the
/// outputs it stores (a compiled one's `manifest` too).
LogicalResult describe(MLIRContext &ctx, const std::string &target, bool isDir,
                       std::vector<StateEntry> &params,
                       std::map<std::string, std::vector<int64_t>> &inputs,
                       std::vector<std::string> &outputs,
                       std::optional<sbpc::ProgramManifest> &manifest) {
  if (isDir) {
    FailureOr<sbpc::ProgramManifest> read = sbpc::readProgramManifest(target);
    if (failed(read))
      return failure();
    manifest = std::move(*read);
    for (const sbpc::ProgramManifest::Load &load : manifest->loads)
      if (load.isParam)
        params.push_back({load.name, load.storedShape, load.dtype});
      else
        inputs[load.name] = load.storedShape;
    for (const sbpc::ProgramManifest::Output &output : manifest->outputs)
      outputs.push_back(output.name);
    return success();
  }
  OwningOpRef<ModuleOp> module = sbpc::parseModelFile(target, ctx);
  if (!module)
    return failure();
  FailureOr<sbpc::ModelSignature> signature = sbpc::getModelSignature(*module);
  if (failed(signature))
    return failure();
  for (const sbpc::ModelArgument &arg : signature->arguments) {
    if (arg.kind != sbpc::ModelArgument::Kind::Param) {
      inputs[arg.name].assign(arg.type().getShape().begin(), arg.type().getShape().end());
      continue;
    }
    std::optional<sbprt::DType> dtype = sbpc::toDType(arg.type().getElementType());
    if (!dtype)
      return emitError(arg.value.getLoc())
             << "parameter '" << arg.name << "' has element type " << arg.type().getElementType()
             << ", which the runtime has no files for";
    params.push_back({arg.name, {arg.storedShape.begin(), arg.storedShape.end()}, *dtype});
  }
  outputs = signature->outputs;
  return success();
}

/// Whether the ranks can run every step in one launch, each keeping the
/// updates of the parameters it loads for the next step: each update is
/// stored in the layout its parameter is loaded in, no partial sum, and
/// there are no pipeline stages (one stage may load a tied parameter that
/// another updates).
bool stepsInOneLaunch(const sbpc::ProgramManifest &manifest) {
  if (manifest.mesh.isPipelineAxis(0))
    return false;
  for (const sbpc::ProgramManifest::Output &output : manifest.outputs)
    for (const sbpc::ProgramManifest::Load &load : manifest.loads)
      if (load.isParam && load.name == output.name &&
          (load.layout != output.layout || load.storedShape != output.storedShape ||
           load.shape != output.shape ||
           llvm::any_of(load.layout, [](const sbprt::Sbp &sbp) { return sbp.isPartial(); })))
        return false;
  return true;
}

/// An input of the steps: its file, and where that holds batches (one
/// more leading dimension), how many and the shape of one.
struct StepInput {
  std::string name, path;
  int64_t batches = 0;
  std::vector<int64_t> shape;
};

bool writeState(const std::string &path, const std::map<std::string, sbprt::Tensor> &state,
                std::string &error) {
  std::vector<std::pair<std::string, const sbprt::Tensor *>> tensors;
  for (const auto &[name, tensor] : state)
    tensors.push_back({name, &tensor});
  return sbprt::io::writeSafetensors(path, tensors, error);
}

/// f32 counts whole numbers exactly below 2^24: a larger step counter
/// would stop counting.
constexpr float kMaxStep = 16777216.0f;

} // namespace

LogicalResult sbpc::runTraining(MLIRContext &ctx, const TrainCommand &command) {
  if (command.steps < 1)
    return reportError("--steps must be at least 1, got " + std::to_string(command.steps));
  bool isDir = llvm::sys::fs::is_directory(command.target);
  std::vector<StateEntry> params;
  std::map<std::string, std::vector<int64_t>> inputShapes;
  std::vector<std::string> outputs;
  std::optional<sbpc::ProgramManifest> manifest;
  if (failed(describe(ctx, command.target, isDir, params, inputShapes, outputs, manifest)))
    return failure();
  if (llvm::find(outputs, "loss") == outputs.end())
    return reportError(command.target + " has no output named 'loss' to train");
  bool isStep = llvm::any_of(params, [&](const StateEntry &p) {
    return llvm::find(outputs, p.name) != outputs.end();
  });
  if (!isStep)
    return reportError(command.target + " is not a training step (no output updates a "
                                        "parameter); compile with --train");

  // The trained parameters go to a new file: the run never replaces what
  // it started from.
  std::vector<std::string> read = {command.paramsPath, command.target};
  for (const std::string &spec : command.inputs)
    read.push_back(llvm::StringRef(spec).split('=').second.str());
  std::vector<std::string> written = {"losses.npy", "params.safetensors", "run.json", ".train/"};
  if (command.saveEvery > 0)
    written.insert(written.end(), {"checkpoint.safetensors", "checkpoint.safetensors.partial"});
  if (failed(refuseOverwritingInputs("--output-dir", command.outputDir, written, read)))
    return failure();

  // Each input: the same batch every step, or a file of S batches (one
  // more leading dimension), step k taking batch k modulo S. (A file that
  // cannot be read, or an input the program lacks, is the run's to report.)
  std::vector<StepInput> stepInputs;
  for (const std::string &spec : command.inputs) {
    auto [name, path] = llvm::StringRef(spec).split('=');
    StepInput input{name.str(), path.str()};
    sbprt::DType dtype;
    std::vector<int64_t> shape;
    std::string unread;
    auto known = inputShapes.find(input.name);
    if (known != inputShapes.end() && sbprt::io::readNpyHeader(input.path, dtype, shape, unread)) {
      if (sbprt::isBatches(shape, known->second)) {
        input.batches = shape.front();
        input.shape = known->second;
      } else if (shape != known->second) {
        return reportError(input.path + ": input '" + input.name + "' has shape " +
                           sbprt::shapeToString(shape) + ", expected " +
                           sbprt::shapeToString(known->second) +
                           " (or [S, ...] with it: S batches, a step each)");
      }
    }
    stepInputs.push_back(std::move(input));
  }

  // The state: every parameter from the file; optimizer states it lacks
  // start at zero, the step counter at 1.
  std::map<std::string, sbprt::Tensor> state;
  std::string error;
  if (command.paramsPath.empty())
    return reportError("--steps needs --params FILE.safetensors");
  std::optional<sbprt::io::SafetensorsFile> file =
      sbprt::io::SafetensorsFile::open(command.paramsPath, error);
  if (!file)
    return reportError(error);
  // Checked here, against the user's file: each step reads a copy the
  // run writes, which the user never named.
  for (const StateEntry &param : params) {
    sbprt::Tensor tensor;
    if (const sbprt::io::SafetensorsEntry *entry = file->find(param.name)) {
      if (entry->dtype != param.dtype || entry->shape != param.shape)
        return reportError(command.paramsPath + ": parameter '" + param.name + "' is " +
                           entry->dtypeName + " " + sbprt::shapeToString(entry->shape) +
                           ", expected " + sbprt::safetensorsName(param.dtype) + " " +
                           sbprt::shapeToString(param.shape));
      if (!file->read(*entry, tensor, error))
        return reportError(error);
      // AdamW's bias corrections divide by 1 - beta^step: a step below 1,
      // or none, trains to NaN.
      float count = param.name == "optimizer.step" ? tensor.as<float>()[0] : 1.0f;
      if (!(count >= 1.0f && count < kMaxStep && count == std::floor(count))) {
        std::ostringstream shown;
        shown << std::setprecision(9) << count;
        return reportError(command.paramsPath + ": 'optimizer.step' is " + shown.str() +
                           ", expected a whole number of steps from 1 (the next step's) below "
                           "16777216");
      }
    } else if (llvm::StringRef(param.name).starts_with("optimizer.")) {
      tensor = sbprt::Tensor(sbprt::DType::F32, param.shape);
      if (param.name == "optimizer.step")
        tensor.as<float>()[0] = 1.0f;
    } else {
      return reportError(command.paramsPath + ": has no parameter '" + param.name + "'");
    }
    state[param.name] = std::move(tensor);
  }

  std::string work = joinPath(command.outputDir, ".train");
  if (std::error_code ec = llvm::sys::fs::create_directories(work))
    return reportError(work + ": cannot create: " + ec.message());
  std::string statePath = joinPath(work, "state.safetensors"), stepDir = joinPath(work, "step");
  std::vector<float> losses; // grows step by step: --steps may be huge
  auto showLoss = [&](const sbprt::Tensor &loss) {
    losses.push_back(loss.as<float>()[0]);
    llvm::errs() << "sbpc: step " << losses.size() << "/" << command.steps << ": loss "
                 << losses.back() << "\n";
  };
  // --save-every K: the state after steps K, 2K, ... (not the last, whose
  // is params.safetensors), each replacing the one before once written.
  std::string checkpointPath = joinPath(command.outputDir, "checkpoint.safetensors");
  auto saves = [&](int64_t done) {
    return command.saveEvery > 0 && done % command.saveEvery == 0 && done < command.steps;
  };
  auto saveCheckpoint = [&](int64_t done, std::string &problem) {
    std::string partial = checkpointPath + ".partial";
    if (!writeState(partial, state, problem))
      return false;
    if (std::error_code ec = llvm::sys::fs::rename(partial, checkpointPath)) {
      problem = checkpointPath + ": cannot write: " + ec.message();
      return false;
    }
    llvm::errs() << "sbpc: step " << done << "/" << command.steps << ": saved " << checkpointPath
                 << "\n";
    return true;
  };
  // The state of the last step, which every step's outputs update.
  auto takeState = [&]() -> LogicalResult {
    for (const std::string &name : outputs) {
      if (name != "loss" && !state.count(name))
        continue;
      sbprt::Tensor value;
      if (!sbprt::io::readNpy(joinPath(stepDir, name + ".npy"), value, error))
        return reportError(error);
      if (name == "loss")
        showLoss(value);
      else
        state[name] = std::move(value);
    }
    return success();
  };
  bool oneLaunch = isDir && stepsInOneLaunch(*manifest);
  if (oneLaunch) {
    // Each earlier step's loss, shown once every rank has finished the
    // step, while the job goes on.
    const sbpc::ProgramManifest::Output &lossOutput =
        *llvm::find_if(manifest->outputs, [](const auto &o) { return o.name == "loss"; });
    std::string lossError;
    // (A loss that cannot be put together stops the job.)
    auto showSteps = [&] {
      while (lossError.empty() && static_cast<int64_t>(losses.size()) + 1 < command.steps) {
        std::string dir = joinPath(stepDir, ".steps/" + std::to_string(losses.size() + 1));
        for (int64_t r = 0; r < manifest->mesh.numDevices(); ++r)
          if (!llvm::sys::fs::exists(joinPath(dir, "rank" + std::to_string(r) + ".done")))
            return true;
        sbprt::Tensor loss;
        if (!sbprt::rank::assembleOutput(*manifest, lossOutput, dir, loss, lossError))
          return false;
        showLoss(loss);
        if (saves(losses.size())) {
          // The ranks wrote every output of this step.
          for (const sbpc::ProgramManifest::Output &output : manifest->outputs)
            if (state.count(output.name) &&
                !sbprt::rank::assembleOutput(*manifest, output, dir, state[output.name], lossError))
              return false;
          if (!saveCheckpoint(losses.size(), lossError))
            return false;
        }
        llvm::sys::fs::remove_directories(dir);
      }
      return lossError.empty();
    };
    if (!writeState(statePath, state, error))
      return reportError(error);
    RunCompiledCommand run{command.target,      statePath,       command.inputs, stepDir,
                           command.memoryLimit, command.timeout, /*quiet=*/true};
    run.steps = command.steps;
    run.stepOutputs = {"loss"};
    run.saveEvery = command.saveEvery;
    run.whileRunning = showSteps;
    LogicalResult ran = runCompiled(run);
    if (!lossError.empty())
      return reportError("step " + std::to_string(losses.size() + 1) + ": " + lossError);
    if (failed(ran))
      return reportError("step " + std::to_string(losses.size() + 1) + " of " +
                         std::to_string(command.steps) + " failed");
    if (static_cast<int64_t>(losses.size()) + 1 != command.steps)
      return reportError("internal: the ranks ran " + std::to_string(command.steps) +
                         " steps but left the losses of " + std::to_string(losses.size()));
    if (failed(takeState()))
      return failure();
  }
  // A step a launch: a file of batches gives each its own.
  std::string batchDir = joinPath(work, "inputs");
  if (std::error_code ec = llvm::sys::fs::create_directories(batchDir))
    return reportError(batchDir + ": cannot create: " + ec.message());
  for (int64_t step = 0; !oneLaunch && step < command.steps; ++step) {
    if (!writeState(statePath, state, error))
      return reportError(error);
    std::vector<std::string> inputs;
    for (const StepInput &input : stepInputs) {
      if (!input.batches) {
        inputs.push_back(input.name + "=" + input.path);
        continue;
      }
      std::vector<int64_t> offsets(input.shape.size() + 1, 0), sizes = input.shape, shape;
      offsets.front() = step % input.batches;
      sizes.insert(sizes.begin(), 1);
      sbprt::Tensor batch;
      std::string path = joinPath(batchDir, input.name + ".npy");
      if (!sbprt::io::readNpySlice(input.path, offsets, sizes, batch, shape, error) ||
          !batch.reshape(input.shape) || !sbprt::io::writeNpy(path, batch, error))
        return reportError(error);
      inputs.push_back(input.name + "=" + path);
    }
    LogicalResult ran =
        isDir ? runCompiled({command.target, statePath, inputs, stepDir, command.memoryLimit,
                             command.timeout, /*quiet=*/true})
              : runReference(ctx, {command.target, statePath, inputs, stepDir, /*quiet=*/true});
    if (failed(ran))
      return reportError("step " + std::to_string(step + 1) + " of " +
                         std::to_string(command.steps) + " failed");
    if (failed(takeState()))
      return failure();
    if (saves(step + 1) && !saveCheckpoint(step + 1, error))
      return reportError(error);
  }
  std::string lossPath = joinPath(command.outputDir, "losses.npy"),
              paramsPath = joinPath(command.outputDir, "params.safetensors");
  sbprt::Tensor lossTensor(sbprt::DType::F32, {static_cast<int64_t>(losses.size())});
  std::copy(losses.begin(), losses.end(), lossTensor.as<float>());
  if (!sbprt::io::writeNpy(lossPath, lossTensor, error) || !writeState(paramsPath, state, error))
    return reportError(error);
  // The ranks' measurements (bytes sent, arena peak; in one launch, each
  // step's seconds), of the last step's launch.
  std::string runPath = joinPath(command.outputDir, "run.json");
  if (isDir)
    if (std::error_code ec = llvm::sys::fs::copy_file(joinPath(stepDir, "run.json"), runPath))
      return reportError(runPath + ": cannot write: " + ec.message());
  llvm::sys::fs::remove_directories(work);
  llvm::outs() << "wrote " << lossPath << " [" << command.steps << "]\n"
               << "wrote " << paramsPath << " (" << state.size()
               << " parameters and optimizer states)\n";
  if (isDir)
    llvm::outs() << "wrote " << runPath
                 << (oneLaunch ? " (what each rank measured, each step's seconds)\n"
                               : " (the last step's measurements per rank)\n");
  return success();
}
