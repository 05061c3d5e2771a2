// Named strategies: the seeds (layouts of parameters and inputs) from which
// propagation lays out a model — data parallel, Megatron tensor parallel,
// both on a 2-D mesh, or only what the user gives.
#pragma once

#include "compiler/Model/ModelSignature.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "runtime/Layout.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sbpc {

/// The strategies `sbpc compile --strategy` accepts.
std::vector<std::string> strategyNames();

/// Whether `strategy` is a search (auto, drec, exact) rather than seeds
/// for propagation.
bool isSearchStrategy(const std::string &strategy);

/// Parses "dp=2,tp=4"; nullopt with a one-line `error` otherwise.
std::optional<sbprt::Mesh> parseMesh(const std::string &text, std::string &error);

struct Seeds {
  /// Argument name (graph.param / graph.input) -> layout.
  std::map<std::string, sbprt::NdSbp> arguments;
  /// The layout the residual stream is pinned to (broadcast on the
  /// tensor-parallel axis): the results of embeddings, the inputs and
  /// results of layer norms, and the model's results. A row-parallel
  /// partial sum is then all-reduced once before the next block, and no
  /// block input is split.
  std::optional<sbprt::NdSbp> residualStream;
};

/// The seeds of a named strategy for `model` on `mesh`; nullopt with a
/// one-line `error` for an unknown strategy or a mesh it cannot use.
std::optional<Seeds> strategySeeds(const std::string &strategy, const ModelSignature &model,
                                   const sbprt::Mesh &mesh, std::string &error);

/// Pins the residual stream of `fn` to `layout` with sbp.constraint ops:
/// what embeddings produce, what layer norms take and produce, and the
/// model's results where the layout fits them (not a training step's
/// updated parameters and optimizer states, which stay split as their
/// parameters are); in a training step also
/// the stream's gradient: what layer norms' gradients take (the forward's
/// input, its pin shared, and the gradient) and produce, and what the
/// embeddings' gradients take.
void pinResidualStream(mlir::func::FuncOp fn, sbp::MeshOp mesh, const sbprt::NdSbp &layout);

} // namespace sbpc
