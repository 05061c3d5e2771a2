// `sbpc compile --target cpu|cuda`: from a laid-out module to a directory of
// per-rank executables.
#pragma once

#include "compiler/Target/Emitter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/Timing.h"

#include <nlohmann/json.hpp>

#include <string>

namespace sbpc {

struct TargetOptions {
  TargetKind kind = TargetKind::Cpu;
  /// The GPU architecture nvcc builds for (--cuda-arch), as in -arch=sm_90.
  std::string cudaArch = "sm_90";
  /// --precision bf16: the programs compute in bf16 (--exec-bf16).
  bool bf16 = false;
  /// --fused-attention: bf16 attention as exec.attention (--exec-fuse).
  bool fusedAttention = true;
  /// --timing: the scope to time lowering, emitting and building under.
  mlir::TimingScope *timing = nullptr;
};

/// Lowers `module` (layouts and boxings explicit) to exec programs, plans
/// their memory, and writes into `outputDir`: exec.mlir,
/// src/<program>.cpp (.cu for CUDA), bin/<program> built by the host
/// compiler (nvcc) with bin/rank<r> links to it, launch.sh and program.json
/// (what `sbpc run` needs). Adds to `report` each rank's program, arena
/// bytes and bytes sent.
mlir::LogicalResult buildTarget(mlir::ModuleOp module, const std::string &cluster,
                                const TargetOptions &options, const std::string &outputDir,
                                nlohmann::json &report);

/// Why `outputDir` cannot take a bundle's copy of the runtime's sources
/// (build.sh's): it lies inside the trees sbpc copies them from, or its
/// runtime/ or include/nlohmann is one of them (an output directory that is
/// sbpc's own tree). "" where it can.
std::string runtimeSourcesClash(const std::string &outputDir);

} // namespace sbpc
