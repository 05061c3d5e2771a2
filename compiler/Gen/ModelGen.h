// Built-in model generators: `sbpc gen gpt` and `sbpc gen mlp`.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>

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

/// Builds the model, or returns null with `error` set to a one-line message
/// naming the bad option.
mlir::OwningOpRef<mlir::ModuleOp> buildGpt(mlir::MLIRContext *ctx, const GptOptions &options,
                                           std::string &error);
mlir::OwningOpRef<mlir::ModuleOp> buildMlp(mlir::MLIRContext *ctx, const MlpOptions &options,
                                           std::string &error);

} // namespace sbpc
