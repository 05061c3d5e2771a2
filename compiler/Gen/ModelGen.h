// Built-in model generators: `sbpc gen gpt` and `sbpc gen mlp`.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sbpc {

/// GPT-2: pre-LayerNorm blocks, causal self-attention, tanh-GELU MLP,
/// learned position embeddings, final LayerNorm, LM head tied to `wte`.
struct GptOptions {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t seq = 16;
  int64_t batch = 2;
  int64_t vocab = 128;
  /// Rows of `wpe.weight` (GPT-2 checkpoints have 1024); 0 means `seq`.
  int64_t positions = 0;
  /// Also take `targets` and return the mean cross-entropy `loss`.
  bool loss = false;
};

/// A multi-layer perceptron: `layers` linear layers with ReLU between them.
struct MlpOptions {
  int64_t batch = 8;
  int64_t inputs = 32;
  int64_t hidden = 64;
  int64_t outputs = 16;
  int64_t layers = 2;
  bool loss = false;
};

/// How a generated parameter starts out.
struct ParamInit {
  enum class Kind { Normal, Zeros, Ones };
  std::string name;
  std::vector<int64_t> storedShape;
  Kind kind = Kind::Normal;
  float stddev = 0.0f; // Normal only
};

struct GeneratedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Every parameter in argument order, with its initialization.
  std::vector<ParamInit> params;
};

/// The largest value a size option may take.
constexpr int64_t kMaxGenOption = int64_t(1) << 20;

/// Builds the model, or returns a null module with `error` set to a one-line
/// message naming the bad option.
GeneratedModel buildGpt(mlir::MLIRContext *ctx, const GptOptions &options, std::string &error);
GeneratedModel buildMlp(mlir::MLIRContext *ctx, const MlpOptions &options, std::string &error);

/// Whether the parameters' initial values fit comfortably in this machine's
/// memory; false with `error` naming their size otherwise.
bool checkParamMemory(const std::vector<ParamInit> &params, const std::string &path,
                      std::string &error);

/// Writes the parameters' initial values, drawn deterministically from
/// `seed`, as a .safetensors file; false with `error` set on failure
/// (including parameters too large for this machine's memory).
bool writeInitialParams(const std::vector<ParamInit> &params, const std::string &path,
                        uint64_t seed, std::string &error);

} // namespace sbpc
