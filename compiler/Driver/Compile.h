// `sbpc compile`: lay a model out on a mesh and report every choice.
#pragma once

#include "mlir/IR/MLIRContext.h"

#include <string>
#include <vector>

namespace sbpc {

struct CompileCommand {
  std::string modelPath;
  std::string mesh;                 // "dp=2,tp=4"
  std::string strategy = "auto";    // see strategyNames()
  std::vector<std::string> layouts; // "NAME=[S(0), B]" seeds that override the strategy
  std::string cluster;              // preset or JSON file; "": defaultCluster(target)
  std::string outputDir;
  bool reportOnly = false;          // --emit report: only report.json
  bool ignoreMemory = false;        // auto: do not reject plans over device memory
  std::string target;               // "" (plan only), "cpu" or "cuda"
  // --train: the model's loss is differentiated and one optimizer step
  // added (--graph-autodiff, --graph-optimizer) before anything else.
  bool train = false;
  std::string optimizer = "adamw"; // sgd | adamw
  double lr = 1e-3, momentum = 0, weightDecay = 0, eps = 1e-8;
  int64_t zero = 0;               // ZeRO stage 0..3 (--sbp-zero)
  int64_t microBatches = 1;       // gradient accumulation (--sbp-micro-batches)
  std::string recompute = "none"; // none | full | selective (--graph-autodiff)
  std::string cudaArch = "sm_90"; // --target cuda: nvcc's -arch
  std::string precision = "f32";  // f32 | bf16 (--exec-bf16 on the rank programs)
  bool fusedAttention = true;     // bf16 attention as exec.attention (--exec-fuse)
  bool timing = false;            // --timing: where the compile's time went, on stderr
  std::string pipelineSchedule = "1f1b"; // 1f1b | interleaved | gpipe | sequential (--sbp-pipeline)
  std::vector<std::string> pipelineStarts; // blocks that begin stages (chunks) 1.. (by hand)
  int64_t pipelineChunks = 1;              // model chunks per stage (interleaved: 2 or more)
};

/// Lays the model out and writes into `outputDir` report.json and, unless
/// reportOnly, the laid-out model sbp.mlir; with a target, also the rank
/// programs and executables (see buildTarget).
mlir::LogicalResult runCompile(mlir::MLIRContext &ctx, const CompileCommand &command);

} // namespace sbpc
