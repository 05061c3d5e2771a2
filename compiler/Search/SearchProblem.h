// The layout search as a problem on plain data: for every op, its candidate
// nd signatures with their compute times; for every value, who produces and
// who consumes it; boxing costs between layouts. Solvers (exact, and later
// D-Rec and auto) choose one signature per op.
#pragma once

#include "compiler/Cost/CostModel.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Sbp/ValueLayouts.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <unordered_map>
#include <vector>

namespace sbpc::search {

/// An op to lay out, in program order.
struct Node {
  mlir::Operation *op;
  std::vector<NdSignature> choices;
  std::vector<double> compute; // seconds, per choice
};

class SearchProblem {
public:
  /// Every op of `fn` with an SbpOpInterface and every sbp.constraint (a
  /// node with one choice) in program order; arguments with an `sbp.layout`
  /// are fixed, the others free (they take their first consumer's layout).
  static mlir::FailureOr<SearchProblem> build(mlir::func::FuncOp fn, const sbprt::Mesh &mesh,
                                              const Cluster &cluster,
                                              sbp::BoxingPlans &plans);

  const std::vector<Node> &nodes() const { return nodes_; }
  /// The fixed layout of an argument, if it has one.
  std::optional<sbprt::NdSbp> fixedLayout(mlir::Value arg) const;
  /// α-β seconds to change `value` from `from` to `to` (memoized).
  double boxingSeconds(mlir::Value value, const sbprt::NdSbp &from, const sbprt::NdSbp &to);
  /// The index after which `value` is no longer used (the number of nodes
  /// when the function returns it).
  size_t lastUse(mlir::Value value) const;
  /// Whether any node or the return uses `value`.
  bool isUsed(mlir::Value value) const { return lastUse_.count(value); }
  mlir::func::FuncOp function() const { return fn_; }

private:
  mlir::func::FuncOp fn_;
  sbp::BoxingPlans *plans_ = nullptr;
  std::vector<Node> nodes_;
  llvm::DenseMap<mlir::Value, sbprt::NdSbp> fixed_;
  llvm::DenseMap<mlir::Value, size_t> lastUse_;
};

/// A solution: one choice per node, and the layouts free arguments took.
struct Solution {
  std::vector<size_t> choice;
  std::vector<std::pair<mlir::Value, sbprt::NdSbp>> freeArguments;
  double seconds = 0;
  size_t statesExplored = 0;
  size_t candidatesEvaluated = 0;
};

/// The cost of choosing `choice[i]` for every node i: compute plus the
/// boxing of every operand from its producer's layout (a free argument
/// takes its first consumer's layout). What every solver minimizes.
double evaluate(SearchProblem &problem, const std::vector<size_t> &choice);

/// The optimum by dynamic programming over program order: the state is the
/// layout of every live value, so the cost of a prefix does not depend on
/// how it was reached. Exact for the model of free arguments above; fails
/// with `error` when more than `maxStates` states would be live at once.
std::optional<Solution> solveExact(SearchProblem &problem, size_t maxStates, std::string &error);

/// Writes `solution` onto the function as --sbp-propagate would (signatures,
/// argument layouts, the mesh), ready for --sbp-insert-boxing.
void applySolution(SearchProblem &problem, const Solution &solution, sbp::MeshOp mesh);

} // namespace sbpc::search
