// `sbpc compile --target cpu|cuda`: spmdize, fuse, plan memory, emit C++ or CUDA
// C++ per program, build the rank executables, and describe the bundle.
#include "compiler/Target/Target.h"

#include "compiler/Sbp/ValueLayouts.h"
#include "compiler/Support/Diagnostics.h"
#include "compiler/Support/Paths.h"
#include "dialects/Exec/IR/ExecOps.h"
#include "passes/Exec/Passes.h"
#include "passes/Exec/ProgramInfo.h"
#include "passes/Sbp/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <set>
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>

using namespace mlir;
using sbpc::absolutePath;
using sbpc::joinPath;

namespace {

// The host compiler and the runtime, as the build configured them.
#include "compiler/Target/Toolchain.inc"

bool writeText(const std::string &path, const std::string &text, std::string &error) {
  std::ofstream file(path);
  file << text;
  file.close();
  if (!file)
    error = path + ": cannot write";
  return static_cast<bool>(file);
}

/// A word for sh: quoted unless it is plain.
std::string shellWord(const std::string &word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789-_./=+:,") == std::string::npos)
    return word;
  std::string quoted = "'";
  for (char c : word)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// The file name of a program's source: .cpp or .cu.
std::string sourceName(const std::string &name, sbpc::TargetKind kind) {
  return "src/" + name + (kind == sbpc::TargetKind::Cuda ? ".cu" : ".cpp");
}

/// Appends the host compiler's `flag` to nvcc's `args`. nvcc splits
/// -Xcompiler's value at commas, so a flag whose value is a list
/// (-fsanitize=address,undefined) goes as one flag per element, and -Wl's
/// list goes to -Xlinker.
void appendNvccHostFlag(llvm::StringRef flag, std::vector<std::string> &args) {
  if (flag.consume_front("-Wl,")) {
    args.push_back("-Xlinker=" + flag.str());
    return;
  }
  auto [name, value] = flag.split('=');
  if (!flag.contains('=') || !value.contains(',')) {
    args.push_back("-Xcompiler=" + flag.str());
    return;
  }
  llvm::SmallVector<llvm::StringRef> elements;
  value.split(elements, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef element : elements)
    args.push_back("-Xcompiler=" + name.str() + "=" + element.str());
}

/// Compiles `dir`/src/`name`.cpp (.cu) into `dir`/bin/`name` with the host
/// compiler (nvcc) against the runtime sbpc was built with, the compiler's
/// output into `dir`/build.log; sets `compiler` to the compiler it ran and
/// `command` to the command (for build.sh).
LogicalResult buildProgram(const std::string &dir, const std::string &name,
                           const sbpc::TargetOptions &options, std::string &compiler,
                           std::string &command) {
  bool cuda = options.kind == sbpc::TargetKind::Cuda;
  std::string source = sourceName(name, options.kind), binary = "bin/" + name;
  std::string log = joinPath(dir, "build.log");
  const char *envName = cuda ? "SBPC_NVCC" : "SBPC_CXX";
  const char *fromEnv = std::getenv(envName);
  std::string cxx = fromEnv && *fromEnv ? fromEnv : cuda ? kNvcc : kCxx;
  if (cxx.empty())
    return sbpc::reportError("--target cuda needs the CUDA toolkit, and this sbpc was built "
                             "without it (install it under /usr/local/cuda and rebuild)");
  // A name with a '/' comes back as it is, found or not.
  llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(cxx);
  if (!found || !llvm::sys::fs::can_execute(*found))
    return sbpc::reportError(std::string(cuda ? "the CUDA compiler '" : "the host C++ compiler '") +
                             cxx + "' was not found (set " + envName + " to another)");
  auto commandLine = [&](const std::string &src, const std::string &bin) {
    std::vector<std::string> args = {*found, "-std=c++17", cuda ? "-O2" : "-O1", "-w"};
    if (cuda)
      args.push_back("-arch=" + options.cudaArch);
    llvm::SmallVector<llvm::StringRef> runtimeFlags;
    if (!cuda) // computing as the runtime's kernels do (runtime/CMakeLists.txt)
      llvm::StringRef(kRuntimeFlags).split(runtimeFlags, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef flag : runtimeFlags)
      args.push_back(flag.str());
    for (const std::string &arg : {std::string("-I"), std::string(kRuntimeInclude), src,
                                   std::string("-o"), bin})
      args.push_back(arg);
    llvm::SmallVector<llvm::StringRef> flags;
    llvm::StringRef(kCxxFlags).split(flags, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef flag : flags)
      if (cuda)
        appendNvccHostFlag(flag, args);
      else
        args.push_back(flag.str());
    if (cuda) {
      args.push_back(kCudaRuntimeLibrary);
      for (const char *library : kCudaLibraries)
        if (*library)
          args.push_back(library);
    }
    for (const char *library : kRuntimeLibraries)
      args.push_back(library);
    if (!cuda)
      for (const char *library : kBlasLibraries)
        args.push_back(library);
    for (const char *library : kMpiLibraries)
      args.push_back(library);
    args.push_back("-lpthread");
    return args;
  };
  std::string error;
  std::string absoluteSource = absolutePath(joinPath(dir, source)),
              absoluteBinary = absolutePath(joinPath(dir, binary));
  std::vector<std::string> args = commandLine(absoluteSource, absoluteBinary);
  compiler = *found;
  command.clear();
  for (const std::string &arg : commandLine(source, binary))
    command += (command.empty() ? "" : " ") + shellWord(arg);
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  // An executable an earlier compile left would pass for this one's.
  llvm::sys::fs::remove(absoluteBinary);
  int code = llvm::sys::ExecuteAndWait(argv[0], argv, std::nullopt, redirects, 0, 0, &error);
  if (code == 0 && !llvm::sys::fs::can_execute(absoluteBinary))
    return sbpc::reportError(args[0] + " succeeded but wrote no executable " + absoluteBinary +
                             " (its output is in " + log + ")");
  if (code == 0)
    return success();
  if (code == -1) // it never ran, so it wrote no log
    return sbpc::reportError("cannot run " + args[0] + " to build " + absoluteSource +
                             (error.empty() ? "" : ": " + error));
  // The first error line tells most; the log has the rest.
  std::ifstream lines(log);
  std::string line, first;
  while (std::getline(lines, line))
    if (line.find("error") != std::string::npos) {
      first = line;
      break;
    }
  return sbpc::reportError("building " + absoluteSource + " failed" +
                           (error.empty() ? "" : " (" + error + ")") +
                           (first.empty() ? "" : ": " + first) + " (full output in " + log + ")");
}

/// Copies the runtime's sources (runtime/, without its CMakeLists.txt, and
/// without cuda/ but for the CUDA target) and the JSON headers they include
/// into `dir`, for build.sh.
LogicalResult copyRuntimeSources(const std::string &dir, sbpc::TargetKind kind) {
  auto copyTree = [&](const std::string &from, const std::string &to) -> LogicalResult {
    std::error_code ec = llvm::sys::fs::create_directories(to);
    if (ec)
      return sbpc::reportError(to + ": cannot create: " + ec.message());
    for (llvm::sys::fs::recursive_directory_iterator it(from, ec), end; it != end && !ec;
         it.increment(ec)) {
      llvm::StringRef path = it->path();
      std::string target = to + path.drop_front(from.size()).str();
      if (it->type() == llvm::sys::fs::file_type::directory_file) {
        // (Never into what it copies: runtimeSourcesClash refuses that.)
        if (bool same = false; !llvm::sys::fs::equivalent(path, to, same) && same) {
          it.no_push();
          continue;
        }
        // The CPU target's programs need no CUDA runtime.
        if (kind != sbpc::TargetKind::Cuda && llvm::sys::path::filename(path) == "cuda") {
          it.no_push();
          continue;
        }
        ec = llvm::sys::fs::create_directories(target);
      } else if (llvm::sys::path::filename(path) == "CMakeLists.txt" ||
                 llvm::sys::path::filename(path).starts_with(".")) {
        continue;
      } else if (bool same = false; llvm::sys::fs::equivalent(path, target, same) || !same) {
        ec = llvm::sys::fs::copy_file(path, target); // (never a file over itself)
      }
      if (ec)
        return sbpc::reportError(target + ": cannot write: " + ec.message());
    }
    if (ec)
      return sbpc::reportError(from + ": cannot read: " + ec.message());
    return success();
  };
  if (std::string clash = sbpc::runtimeSourcesClash(dir); !clash.empty())
    return sbpc::reportError(clash);
  if (failed(copyTree(joinPath(kRuntimeInclude, "runtime"), joinPath(dir, "runtime"))))
    return failure();
  return copyTree(joinPath(kJsonInclude, "nlohmann"), joinPath(dir, "include/nlohmann"));
}

/// Words for sh, a space between.
std::string shellWords(llvm::ArrayRef<const char *> words, llvm::StringRef prefix = "") {
  std::string text;
  for (const char *word : words)
    if (*word)
      text += (text.empty() ? "" : " ") + shellWord(prefix.str() + word);
  return text;
}

/// build.sh: builds the runtime from the bundle's copy of its sources, then
/// each of `programs` against it, wherever the bundle is and with no sbpc;
/// `compiler` and `commands`: what sbpc ran (the default compiler, and
/// comments).
std::string buildScript(const std::vector<std::string> &programs,
                        const std::vector<std::string> &binaryOfRank, const std::string &compiler,
                        const std::vector<std::string> &commands,
                        const sbpc::TargetOptions &options) {
  bool cuda = options.kind == sbpc::TargetKind::Cuda;
  std::string text =
      "#!/bin/sh\n"
      "# Rebuilds this bundle's programs from src/ and the runtime's sources\n"
      "# under runtime/ (include/: the JSON headers they read with), with no sbpc:\n" +
      std::string(cuda ? "# the CUDA toolkit with cuBLAS and NCCL, and MPI, are all it needs.\n"
                       : "# a C++17 compiler, MPI and a CBLAS are all it needs.\n") +
      "# Each setting below may be given in the environment instead, e.g.\n"
      "#   MPI_INCLUDE=-I/opt/mpi/include MPI_LIBS=\"-L/opt/mpi/lib -lmpi\" ./build.sh\n"
      "# sbpc compile built them against the runtime it was built with:\n";
  for (const std::string &command : commands)
    text += "#   " + command + "\n";
  text += "set -e\n"
          "CDPATH= cd -- \"$(dirname -- \"$0\")\"\n";
  if (cuda)
    text += "NVCC=${NVCC:-" + shellWord(compiler) + "}\n" + "CUDA_ARCH=${CUDA_ARCH:-" +
            shellWord(options.cudaArch) + "}\n" + "NCCL_INCLUDE=${NCCL_INCLUDE:-" +
            shellWords({kNcclInclude}, "-I") + "}\n" + "CUDA_LIBS=${CUDA_LIBS:-\"" +
            shellWords(kCudaLibraries) + "\"}\n";
  else
    text += "CXX=${CXX:-" + shellWord(compiler) + "}\n" + "BLAS_INCLUDE=${BLAS_INCLUDE:-" +
            shellWords({kBlasInclude}, "-I") + "}\n" + "BLAS_LIBS=${BLAS_LIBS:-\"" +
            shellWords(kBlasLibraries) + "\"}\n";
  if (!cuda)
    text += "CXXFLAGS=${CXXFLAGS:-\"" + std::string(kCxxFlags) + "\"}\n";
  text += "MPI_INCLUDE=${MPI_INCLUDE:-\"" + shellWords(kMpiIncludes, "-I") + "\"}\n" +
          "MPI_LIBS=${MPI_LIBS:-\"" + shellWords(kMpiLibraries) + "\"}\n";
  // The runtime, as CMake builds it in Release; nvcc passes host flags on.
  std::string compile =
      cuda ? "$NVCC -std=c++17 -O3 -DNDEBUG -w -arch=$CUDA_ARCH"
           : "$CXX -std=c++17 -O3 -DNDEBUG -w " + std::string(kRuntimeFlags) + " $CXXFLAGS";
  text += "rm -rf obj && mkdir -p obj bin\n"
          "for source in";
  for (const char *source : kRuntimeSources)
    text += " " + std::string(source);
  for (const char *source : cuda ? llvm::ArrayRef<const char *>(kCudaRuntimeSources)
                                 : llvm::ArrayRef<const char *>(kBlasRuntimeSources))
    if (*source)
      text += " " + std::string(source);
  text += "; do\n"
          "  echo \"build.sh: runtime/$source\"\n"
          "  " +
          compile + " -I . -I include $MPI_INCLUDE " + (cuda ? "$NCCL_INCLUDE" : "$BLAS_INCLUDE") +
          " -c \"runtime/$source\" -o \"obj/$(echo \"$source\" | tr / _).o\"\n"
          "done\n"
          "ar rcs obj/libsbprt.a obj/*.o\n";
  for (const std::string &program : programs) {
    text += "echo \"build.sh: bin/" + program + "\"\n";
    text += cuda ? "$NVCC -std=c++17 -O2 -w -arch=$CUDA_ARCH -I . " +
                       sourceName(program, options.kind) + " -o bin/" + program +
                       " obj/libsbprt.a $CUDA_LIBS $MPI_LIBS -lpthread\n"
                 : "$CXX -std=c++17 -O1 -w " + std::string(kRuntimeFlags) + " $CXXFLAGS -I . " +
                       sourceName(program, options.kind) + " -o bin/" + program +
                       " obj/libsbprt.a $BLAS_LIBS $MPI_LIBS -lpthread\n";
  }
  // What launch.sh puts the outputs together with.
  text += "echo \"build.sh: bin/assemble\"\n";
  text += cuda ? "$NVCC -std=c++17 -O2 -w -I . -I include runtime/rank/AssembleMain.cpp -o "
                 "bin/assemble obj/libsbprt.a\n"
               : "$CXX -std=c++17 -O2 -w $CXXFLAGS -I . -I include runtime/rank/AssembleMain.cpp "
                 "-o bin/assemble obj/libsbprt.a\n";
  // Each rank's link to its program.
  for (size_t r = 0; r < binaryOfRank.size(); ++r)
    text += "ln -sf " + binaryOfRank[r] + " bin/rank" + std::to_string(r) + "\n";
  return text;
}

std::string launchScript(const std::vector<std::string> &binaries, sbpc::TargetKind kind) {
  std::string text =
      "#!/bin/sh\n"
      "# Runs this program's " +
      std::to_string(binaries.size()) + " ranks (written by sbpc compile --target " +
      sbpc::targetName(kind) +
      "):\n"
      "#   launch.sh --params P.safetensors --input NAME=FILE.npy ... --output-dir DIR\n"
      "# Each rank writes its shards under DIR/.shards; then bin/assemble puts\n"
      "# each output together as DIR/NAME.npy (what they measured: DIR/run.json).\n"
      "# --no-assemble (first) leaves the shards (`sbpc run` assembles them).\n"
      "# --steps N runs N training steps, each update the next step's\n"
      "# parameter (not a pipeline's: a launch a step); DIR/.steps/K has step\n"
      "# K's --step-outputs NAME,... shards.\n"
      "here=$(CDPATH= cd -- \"$(dirname -- \"$0\")\" && pwd)\n"
      "assemble=1\n"
      "if [ \"$1\" = --no-assemble ]; then assemble=0; shift; fi\n"
      "out=\n"
      "previous=\n"
      "for arg in \"$@\"; do\n"
      "  [ \"$previous\" = --output-dir ] && out=$arg\n"
      "  previous=$arg\n"
      "done\n"
      "# No shards of an earlier run may pass for this one's.\n"
      "[ $assemble = 1 ] && [ -n \"$out\" ] && rm -rf \"$out/.shards\" \"$out/.steps\"\n"
      "export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}\n"
      "# Containers often forbid the cross-memory attach OpenMPI copies with.\n"
      "export "
      "OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
      "\n";
  if (binaries.size() == 1) {
    text += "\"$here/bin/" + binaries[0] + "\" \"$@\" || exit $?\n";
  } else {
    text += "mpirun --allow-run-as-root --oversubscribe --bind-to none";
    for (size_t r = 0; r < binaries.size(); ++r)
      text += std::string(r ? " :" : "") + " \\\n  -np 1 \"$here/bin/" + binaries[r] + "\" \"$@\"";
    text += " || exit $?\n";
  }
  return text + "if [ $assemble = 1 ] && [ -n \"$out\" ]; then\n"
                "  exec \"$here/bin/assemble\" \"$here\" \"$out\"\n"
                "fi\n";
}

/// Why the runtime's kernels would not load on a GPU of `arch` (sm_NN), or
/// "": machine code runs on GPUs of its major version and a later minor
/// one, PTX on any later GPU (compiled as it loads).
std::string runtimeArchProblem(llvm::StringRef arch) {
  unsigned gpu = 0;
  if (arch.ends_with("a") || arch.ends_with("f")) // sm_90a: an sm_90 GPU
    arch = arch.drop_back();
  if (!*kCudaArchitectures || !arch.consume_front("sm_") || arch.getAsInteger(10, gpu))
    return ""; // no CUDA target (said elsewhere), or not a number (sbpc checks)
  llvm::SmallVector<llvm::StringRef> built;
  llvm::StringRef(kCudaArchitectures).split(built, ';', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef entry : built) {
    auto [number, kind] = entry.split('-');
    unsigned code = 0;
    if (number.getAsInteger(10, code))
      return ""; // all, all-major, native: CMake chose; trust it
    bool machineCode = kind != "virtual", ptx = kind != "real";
    if ((ptx && code <= gpu) || (machineCode && code / 10 == gpu / 10 && code <= gpu))
      return "";
  }
  return "the CUDA runtime was built for " + std::string(kCudaArchitectures) +
         " (SBPC_CUDA_ARCHITECTURES), so its kernels would not load on an sm_" +
         std::to_string(gpu) + " GPU: rebuild it with cmake -DSBPC_CUDA_ARCHITECTURES=\"" +
         std::to_string(gpu) + ";" + kCudaArchitectures + "\"";
}

} // namespace

std::string sbpc::runtimeSourcesClash(const std::string &outputDir) {
  // Not inside what it copies from (it would copy into what it reads).
  // (Links resolved as far as it exists.)
  llvm::SmallString<256> output(absolutePath(outputDir));
  llvm::sys::path::remove_dots(output, /*remove_dot_dot=*/true);
  std::string rest;
  while (llvm::sys::path::has_parent_path(output) && !llvm::sys::fs::exists(output)) {
    rest = "/" + llvm::sys::path::filename(output).str() + rest;
    llvm::sys::path::remove_filename(output);
  }
  if (llvm::SmallString<256> real; !llvm::sys::fs::real_path(output, real))
    output = real;
  output += rest;
  for (std::string source :
       {joinPath(kRuntimeInclude, "runtime"), joinPath(kJsonInclude, "nlohmann")}) {
    if (llvm::SmallString<256> real; !llvm::sys::fs::real_path(source, real))
      source = real.str().str();
    if (output.str() == source || output.str().starts_with(source + "/"))
      return outputDir + " is inside " + source +
             ", which sbpc copies the runtime's sources from: compile into another directory";
  }
  for (auto [from, to] :
       {std::pair(joinPath(kRuntimeInclude, "runtime"), joinPath(outputDir, "runtime")),
        std::pair(joinPath(kJsonInclude, "nlohmann"), joinPath(outputDir, "include/nlohmann"))}) {
    bool same = false;
    if (!llvm::sys::fs::equivalent(from, to, same) && same)
      return to + " is where sbpc copies the runtime's sources from: compile into another "
                  "directory";
  }
  return "";
}

LogicalResult sbpc::buildTarget(ModuleOp module, const std::string &cluster,
                                const TargetOptions &options, const std::string &outputDir,
                                nlohmann::json &report) {
  if (options.kind == TargetKind::Cuda)
    if (std::string problem = runtimeArchProblem(options.cudaArch); !problem.empty())
      return reportError("--cuda-arch " + options.cudaArch + ": " + problem);
  if (failed(copyRuntimeSources(outputDir, options.kind)))
    return failure();
  PassManager pm(module.getContext());
  sbp::SbpSpmdizeOptions spmdize;
  spmdize.cluster = cluster;
  pm.addPass(sbp::createSbpSpmdize(spmdize));
  if (options.bf16)
    pm.addPass(exec::createExecBf16());
  exec::ExecFuseOptions fuse;
  fuse.attention = options.fusedAttention;
  pm.addPass(exec::createExecFuse(fuse));
  pm.addPass(exec::createExecPlanMemory());
  TimingScope timing = options.timing ? options.timing->nest("lower to exec programs") : TimingScope();
  pm.enableTiming(timing);
  if (failed(pm.run(module)))
    return failure();
  timing.stop();
  std::string error;
  {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    if (!writeText(joinPath(outputDir, "exec.mlir"), text, error))
      return reportError(error);
  }
  for (const char *sub : {"src", "bin"})
    if (std::error_code ec = llvm::sys::fs::create_directories(joinPath(outputDir, sub)))
      return reportError(joinPath(outputDir, sub) + ": cannot create: " + ec.message());

  std::vector<std::string> binaryOfRank, programOfRank, programNames, commands;
  std::string compiler;
  nlohmann::json ranks = nlohmann::json::array(), manifestOutputs = nlohmann::json::array(),
                 manifestLoads = nlohmann::json::array();
  sbprt::Mesh mesh;
  std::set<std::string> loaded;
  int index = 0;
  for (auto program : module.getOps<func::FuncOp>()) {
    if (!exec::isProgram(program))
      continue;
    FailureOr<sbprt::Mesh> programMesh = exec::programMesh(program);
    if (failed(programMesh))
      return failure();
    mesh = *programMesh;
    std::string name = "program" + std::to_string(index++);
    std::string source = joinPath(outputDir, sourceName(name, options.kind));
    TimingScope emitting = options.timing ? options.timing->nest("emit " + name) : TimingScope();
    std::ofstream file(source);
    if (failed(emitProgram(program, mesh, name, options.kind, file)))
      return failure();
    file.close();
    if (!file)
      return reportError(source + ": cannot write");
    emitting.stop();
    llvm::errs() << "sbpc: building " << name << " (" << source << ")\n";
    TimingScope building = options.timing ? options.timing->nest("build " + name) : TimingScope();
    std::string command;
    if (failed(buildProgram(outputDir, name, options, compiler, command)))
      return failure();
    programNames.push_back(name);
    commands.push_back(command);
    building.stop();
    // What --exec-fuse chose: how many of each op it makes.
    nlohmann::json &fused = report["fused_ops"][name] = nlohmann::json::object();
    program.walk([&](Operation *op) {
      if (isa<exec::FusedOp, exec::LinearOp, exec::MatmulGeluGradOp, exec::MatmulBiasGradOp,
              exec::CausalMatmulOp, exec::SoftmaxOp, exec::SoftmaxGradOp, exec::AttentionOp,
              exec::AttentionGradOp>(op)) {
        nlohmann::json &count = fused[op->getName().getStringRef().str()];
        count = count.is_null() ? 1 : count.get<int64_t>() + 1;
      }
    });
    int64_t arena = program->getAttrOfType<IntegerAttr>(exec::kArenaBytes).getInt();
    for (int64_t rank : program->getAttrOfType<DenseI64ArrayAttr>(exec::kProgramRanks).asArrayRef()) {
      if (binaryOfRank.size() <= static_cast<size_t>(rank))
        binaryOfRank.resize(rank + 1);
      if (!binaryOfRank[rank].empty())
        return program.emitOpError() << "rank " << rank
                                     << " already runs another program (one model function "
                                        "per module)";
      binaryOfRank[rank] = "rank" + std::to_string(rank);
      if (programOfRank.size() <= static_cast<size_t>(rank))
        programOfRank.resize(rank + 1);
      programOfRank[rank] = name;
      std::string link = joinPath(outputDir, "bin/" + binaryOfRank[rank]);
      llvm::sys::fs::remove(link);
      if (std::error_code ec = llvm::sys::fs::create_link(name, link))
        return reportError(link + ": cannot link: " + ec.message());
      ranks.push_back({{"rank", rank},
                       {"coordinates", mesh.coordinates(rank)},
                       {"program", name},
                       {"arena_bytes", arena},
                       {"comm_bytes", exec::commBytesOfRank(program, mesh, rank)}});
    }
    program.walk([&](Operation *op) {
      auto layoutText = [](sbp::NdSbpAttr layout) { return sbprt::toString(layout.toLayout()); };
      auto dtype = [](Type type) {
        // The files' types: a bf16 value is read from and written as f32.
        return cast<RankedTensorType>(type).getElementType().isInteger(64) ? "int64" : "float32";
      };
      // The shape in the file: `stored` where the op has one.
      auto fileShape = [](std::optional<ArrayRef<int64_t>> stored, ArrayRef<int64_t> global) {
        return (stored ? *stored : global).vec();
      };
      // A pipeline's stages may each load the same argument: listed once.
      if (auto load = dyn_cast<exec::LoadOp>(op); load && loaded.insert(load.getName().str()).second)
        manifestLoads.push_back({{"kind", load.getKind().str()},
                                  {"name", load.getName().str()},
                                  {"dtype", dtype(load.getType())},
                                  {"shape", load.getGlobalShape()},
                                  {"stored_shape", fileShape(load.getStoredShape(),
                                                             load.getGlobalShape())},
                                  {"layout", layoutText(load.getLayout())}});
      else if (auto store = dyn_cast<exec::StoreOp>(op);
               store && (!store.getRows() || (*store.getRows())[0] == 0))
        manifestOutputs.push_back(
            {{"name", store.getName().str()},
             {"dtype", dtype(store.getValue().getType())},
             {"shape", store.getGlobalShape()},
             {"stored_shape", fileShape(store.getStoredShape(), store.getGlobalShape())},
             {"layout", layoutText(store.getLayout())},
             {"stage", sbp::stageOf(program)}});
    });
  }
  if (binaryOfRank.size() != static_cast<size_t>(mesh.numDevices()) ||
      llvm::any_of(binaryOfRank, [](const std::string &b) { return b.empty(); }))
    return reportError("internal: the programs do not cover every rank of the mesh");

  auto executable = [](const std::string &path) {
    llvm::sys::fs::setPermissions(path, llvm::sys::fs::perms::all_read |
                                            llvm::sys::fs::perms::owner_write |
                                            llvm::sys::fs::perms::all_exe);
  };
  std::string assemble = joinPath(outputDir, "bin/assemble");
  llvm::sys::fs::remove(assemble);
  if (std::error_code ec = llvm::sys::fs::copy_file(kAssembleTool, assemble))
    return reportError(assemble + ": cannot write: " + ec.message());
  executable(assemble);
  for (auto [file, text] :
       {std::pair(std::string("launch.sh"), launchScript(binaryOfRank, options.kind)),
        std::pair(std::string("build.sh"),
                  buildScript(programNames, programOfRank, compiler, commands, options))}) {
    std::string script = joinPath(outputDir, file);
    if (!writeText(script, text, error))
      return reportError(error);
    executable(script);
  }
  nlohmann::json manifest = {{"version", 1},
                             {"target", targetName(options.kind)},
                             {"mesh", {{"axes", mesh.axes}, {"shape", mesh.shape}}},
                             {"ranks", mesh.numDevices()},
                             {"loads", manifestLoads},
                             {"outputs", manifestOutputs}};
  if (!writeText(joinPath(outputDir, "program.json"), manifest.dump(2) + "\n", error))
    return reportError(error);

  report["target"] = targetName(options.kind);
  report["ranks"] = ranks;
  uint64_t arenaMax = 0;
  for (const nlohmann::json &rank : ranks)
    arenaMax = std::max(arenaMax, rank["arena_bytes"].get<uint64_t>());
  report["totals"]["arena_bytes_per_rank"] = arenaMax;
  return success();
}
