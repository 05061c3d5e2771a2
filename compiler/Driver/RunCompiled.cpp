// `sbpc run DIR`: launch a compiled program's ranks and assemble what they
// wrote.
#include "compiler/Driver/Commands.h"

#include "compiler/Support/Diagnostics.h"
#include "compiler/Support/JsonFile.h"
#include "compiler/Support/Paths.h"
#include "runtime/rank/Program.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

extern char **environ;

using namespace mlir;
using sbpc::absolutePath;
using sbpc::joinPath;
using sbpc::reportError;

namespace {

/// The first line in which a rank reported its failure, else the last
/// non-empty line of the job's output.
std::string failureLine(const std::string &log) {
  std::ifstream lines(log);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (line.rfind("rank ", 0) == 0 && line.find(" failed in ") != std::string::npos)
      return line;
    if (line.find_first_not_of(" -*=\t") != std::string::npos)
      last = line;
  }
  return last.empty() ? "the job failed without a message" : last;
}

/// Whether the job's log says mpirun could not start a rank at all: its
/// "process rank R with PID 0 ... exiting improperly", and no rank's own
/// failure. A loaded machine shows it now and then and a second launch
/// does not; no rank ran the program, so the job can start again.
bool launchFailed(const std::string &log) {
  std::ifstream lines(log);
  bool noProcess = false, improper = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("rank ", 0) == 0 && line.find(" failed in ") != std::string::npos)
      return false;
    noProcess |= line.find(" with PID 0 on") != std::string::npos;
    improper |= line.find("exiting improperly") != std::string::npos;
  }
  return noProcess && improper;
}

/// The runtime's warnings in the job's log ("sbprt: warning: ..."), each
/// once: they concern the user whether the job succeeds or fails.
std::vector<std::string> runtimeWarnings(const std::string &log) {
  std::ifstream lines(log);
  std::vector<std::string> warnings;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("sbprt: warning: ", 0) == 0 && !llvm::is_contained(warnings, line))
      warnings.push_back(line);
  return warnings;
}

/// Runs the job to its end, as llvm::sys::ExecuteAndWait does (its exit
/// code; negative where it could not start or was killed, with `error`
/// set), calling `whileRunning` every quarter of a second where given,
/// and once at the end; where it returns false the job is stopped.
int runJob(llvm::ArrayRef<llvm::StringRef> argv, std::optional<llvm::ArrayRef<llvm::StringRef>> env,
           llvm::ArrayRef<std::optional<llvm::StringRef>> redirects,
           const std::function<bool()> &whileRunning, bool &stopped, std::string &error) {
  if (!whileRunning)
    return llvm::sys::ExecuteAndWait(argv[0], argv, env, redirects, 0, 0, &error);
  bool failed = false;
  llvm::sys::ProcessInfo job =
      llvm::sys::ExecuteNoWait(argv[0], argv, env, redirects, 0, &error, &failed);
  if (failed)
    return -1;
  for (;;) {
    llvm::sys::ProcessInfo done = llvm::sys::Wait(job, /*SecondsToWait=*/0, &error,
                                                  /*ProcStat=*/nullptr, /*Polling=*/true);
    if (done.Pid != 0) {
      stopped = !whileRunning();
      return done.ReturnCode;
    }
    if (!whileRunning()) {
      // mpirun passes the signal on to the ranks.
      ::kill(job.Pid, SIGTERM);
      llvm::sys::Wait(job, std::nullopt, &error);
      stopped = true;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

} // namespace

FailureOr<sbpc::ProgramManifest> sbpc::readProgramManifest(const std::string &dir) {
  std::string error;
  std::optional<ProgramManifest> manifest = sbprt::rank::readProgramManifest(dir, error);
  if (!manifest)
    return reportError(error);
  // Every rank's executable, before mpirun would fail to start it.
  for (int64_t r = 0; r < manifest->mesh.numDevices(); ++r) {
    std::string binary = joinPath(dir, "bin/rank" + std::to_string(r));
    if (!llvm::sys::fs::can_execute(binary))
      return reportError(binary + ": missing or not executable (compile " + dir + " again)");
  }
  // A launch.sh that would hand --no-assemble to the ranks (one an sbpc
  // before 2026-11-29 wrote, which left assembling to sbpc run).
  std::ifstream launch(joinPath(dir, "launch.sh"));
  std::string script((std::istreambuf_iterator<char>(launch)), std::istreambuf_iterator<char>());
  if (script.find("--no-assemble") == std::string::npos)
    return reportError(joinPath(dir, "launch.sh") +
                       ": missing or written by an earlier sbpc "
                       "(compile " +
                       dir + " again)");
  return *manifest;
}

LogicalResult sbpc::runCompiled(const RunCompiledCommand &command) {
  FailureOr<ProgramManifest> manifest = readProgramManifest(command.programDir);
  if (failed(manifest))
    return failure();
  const sbprt::Mesh &mesh = manifest->mesh;

  // Every input the program loads, and no other, before starting any rank.
  std::map<std::string, std::string> inputs;
  for (const std::string &spec : command.inputs) {
    auto [name, path] = llvm::StringRef(spec).split('=');
    if (name.empty() || path.empty())
      return reportError("--input '" + spec + "' must be NAME=FILE.npy");
    if (!inputs.emplace(name.str(), absolutePath(path.str())).second)
      return reportError("--input '" + name.str() + "' is given twice");
  }
  std::set<std::string> wanted;
  bool needsParams = false;
  for (const ProgramManifest::Load &load : manifest->loads) {
    const std::string &name = load.name;
    if (load.isParam) {
      needsParams = true;
    } else {
      wanted.insert(name);
      if (!inputs.count(name))
        return reportError("the program needs input '" + name + "': pass --input " + name +
                           "=FILE.npy");
    }
  }
  for (const auto &[name, path] : inputs)
    if (!wanted.count(name))
      return reportError("--input '" + name + "': the program has no input of that name");
  if (needsParams && command.paramsPath.empty())
    return reportError("the program needs parameters: pass --params FILE.safetensors");
  if (needsParams && !llvm::sys::fs::exists(command.paramsPath))
    return reportError(command.paramsPath + ": no such file");
  std::vector<std::string> written = {"run.json", "job.log", ".shards/", ".steps/"},
                           read = {command.paramsPath, command.programDir};
  for (const ProgramManifest::Output &output : manifest->outputs)
    written.push_back(output.name + ".npy");
  for (const auto &[name, path] : inputs)
    read.push_back(path);
  if (failed(refuseOverwritingInputs("--output-dir", command.outputDir, written, read)))
    return failure();

  std::string shards = joinPath(command.outputDir, ".shards");
  llvm::sys::fs::remove_directories(shards);
  llvm::sys::fs::remove_directories(joinPath(command.outputDir, ".steps"));
  if (std::error_code ec = llvm::sys::fs::create_directories(shards))
    return reportError(shards + ": cannot create: " + ec.message());
  // (sbpc puts the outputs together itself, below.)
  std::vector<std::string> args = {absolutePath(joinPath(command.programDir, "launch.sh")),
                                   "--no-assemble"};
  if (needsParams)
    args.insert(args.end(), {"--params", absolutePath(command.paramsPath)});
  for (const auto &[name, path] : inputs)
    args.insert(args.end(), {"--input", name + "=" + path});
  args.insert(args.end(), {"--output-dir", absolutePath(command.outputDir)});
  if (command.timeout > 0) {
    // Every digit: the ranks check the value sbpc checked (std::to_string
    // made 1e-300 "0.000000", which they refused).
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%.17g", command.timeout);
    args.insert(args.end(), {"--timeout", timeout});
  }
  if (command.memoryLimit)
    args.insert(args.end(), {"--memory-limit", std::to_string(command.memoryLimit)});
  if (command.repeat > 1)
    args.insert(args.end(), {"--repeat", std::to_string(command.repeat)});
  if (command.profileOps)
    args.insert(args.end(), {"--profile", "ops"});
  if (command.steps > 0)
    args.insert(args.end(), {"--steps", std::to_string(command.steps)});
  if (command.saveEvery > 0)
    args.insert(args.end(), {"--save-every", std::to_string(command.saveEvery)});
  if (!command.stepOutputs.empty())
    args.insert(args.end(), {"--step-outputs", llvm::join(command.stepOutputs, ",")});
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::string log = joinPath(command.outputDir, "job.log");
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string error;
  int64_t ranks = mesh.numDevices();
  if (!command.quiet)
    llvm::errs() << "sbpc: running " << ranks << (ranks == 1 ? " rank" : " ranks") << "\n";
  constexpr int kLaunches = 3;
  int code = 0;
  bool stopped = false;
  for (int launch = 1;; ++launch) {
    // Each job gets an Open MPI session directory of its own (a short
    // path: it holds sockets): jobs started at once, as tests in parallel,
    // race to create the shared one under TMPDIR, and the loser's mpirun
    // cannot start.
    llvm::SmallString<128> session;
    std::vector<std::string> environment;
    if (!std::getenv("OMPI_MCA_orte_tmpdir_base") &&
        !llvm::sys::fs::createUniqueDirectory("sbpc-mpi", session)) {
      for (char **variable = environ; *variable; ++variable)
        environment.emplace_back(*variable);
      environment.push_back("OMPI_MCA_orte_tmpdir_base=" + session.str().str());
    }
    std::vector<llvm::StringRef> env(environment.begin(), environment.end());
    code = runJob(argv, environment.empty() ? std::nullopt : std::optional(llvm::ArrayRef(env)),
                  redirects, command.whileRunning, stopped, error);
    if (!session.empty())
      llvm::sys::fs::remove_directories(session);
    if (stopped)
      return failure(); // the caller says why
    if (code == 0 || launch == kLaunches || !launchFailed(log))
      break;
    llvm::errs() << "sbpc: warning: mpirun could not start every rank (" << log
                 << "); launching again (" << launch + 1 << " of " << kLaunches << ")\n";
  }
  for (const std::string &warning : runtimeWarnings(log))
    llvm::errs() << warning << "\n";
  if (code != 0)
    return reportError(failureLine(log) + (code < 0 ? " (" + error + ")" : "") +
                       " (the job's output is in " + log + ")");

  // Outputs: every rank's shard where it wrote one, assembled as laid out.
  if (!sbprt::rank::assembleOutputs(
          *manifest, absolutePath(command.programDir), command.outputDir,
          [&](const std::string &path, const std::vector<int64_t> &shape) {
            if (!command.quiet)
              llvm::outs() << "wrote " << path << " " << sbprt::shapeToString(shape) << "\n";
          },
          error))
    return reportError(error);
  return success();
}
