// Building the search problem from a seeded function, and applying a solution.
#include "compiler/Search/SearchProblem.h"

#include "runtime/Tensor.h"

using namespace mlir;

namespace sbpc::search {

FailureOr<SearchProblem> SearchProblem::build(func::FuncOp fn, const sbprt::Mesh &mesh,
                                              const Cluster &cluster, sbp::BoxingPlans &plans) {
  SearchProblem problem;
  problem.fn_ = fn;
  problem.plans_ = &plans;
  for (BlockArgument arg : fn.getArguments())
    if (std::optional<sbprt::NdSbp> layout = sbp::layoutOf(arg)) {
      std::string error = sbp::checkValueLayout(mesh, *layout, arg);
      if (!error.empty())
        return emitError(arg.getLoc()) << "argument #" << arg.getArgNumber() << " layout "
                                       << sbprt::toString(*layout) << ": " << error;
      problem.fixed_[arg] = *layout;
    }
  for (Operation &op : fn.getBody().front()) {
    if (isa<func::ReturnOp>(op)) {
      for (Value v : op.getOperands())
        problem.lastUse_[v] = std::numeric_limits<size_t>::max();
      continue;
    }
    Node node{&op, {}, {}};
    if (auto constraint = dyn_cast<sbp::ConstraintOp>(op)) {
      sbprt::NdSbp pinned = constraint.getLayout().toLayout();
      node.choices.push_back({{pinned}, {pinned}});
      node.compute.push_back(0.0);
    } else {
      node.choices = ndSignatures(&op, mesh);
      if (node.choices.empty())
        return op.emitOpError() << "has no SBP signature on this mesh";
      for (const NdSignature &sig : node.choices)
        node.compute.push_back(sbp::computeSecondsOf(&op, sig, mesh, cluster));
    }
    for (Value operand : op.getOperands())
      if (problem.lastUse_.lookup(operand) != std::numeric_limits<size_t>::max())
        problem.lastUse_[operand] = problem.nodes_.size();
    problem.nodes_.push_back(std::move(node));
  }
  // Returned values live to the end.
  for (auto &entry : problem.lastUse_)
    if (entry.second == std::numeric_limits<size_t>::max())
      entry.second = problem.nodes_.size();
  return problem;
}

std::optional<sbprt::NdSbp> SearchProblem::fixedLayout(Value arg) const {
  auto it = fixed_.find(arg);
  return it == fixed_.end() ? std::nullopt : std::optional<sbprt::NdSbp>(it->second);
}

double SearchProblem::boxingSeconds(Value value, const sbprt::NdSbp &from,
                                    const sbprt::NdSbp &to) {
  return from == to ? 0.0 : plans_->get(value, from, to).seconds;
}

size_t SearchProblem::lastUse(Value value) const { return lastUse_.lookup(value); }

double evaluate(SearchProblem &problem, const std::vector<size_t> &choice) {
  llvm::DenseMap<Value, sbprt::NdSbp> layouts;
  for (BlockArgument arg : problem.function().getArguments())
    if (std::optional<sbprt::NdSbp> fixed = problem.fixedLayout(arg))
      layouts[arg] = *fixed;
  double seconds = 0;
  for (auto [node, c] : llvm::zip(problem.nodes(), choice)) {
    const NdSignature &sig = node.choices[c];
    seconds += node.compute[c];
    for (auto [k, operand] : llvm::enumerate(node.op->getOperands())) {
      auto [it, isNew] = layouts.try_emplace(operand, sig.operands[k]);
      if (!isNew)
        seconds += problem.boxingSeconds(operand, it->second, sig.operands[k]);
    }
    for (auto [result, layout] : llvm::zip(node.op->getResults(), sig.results))
      layouts[result] = layout;
  }
  return seconds;
}

void applySolution(SearchProblem &problem, const Solution &solution, sbp::MeshOp mesh) {
  func::FuncOp fn = problem.function();
  for (auto [node, choice] : llvm::zip(problem.nodes(), solution.choice))
    if (!isa<sbp::ConstraintOp>(node.op))
      sbp::setSignature(node.op, node.choices[choice].operands, node.choices[choice].results);
  MLIRContext *ctx = fn.getContext();
  for (const auto &[arg, layout] : solution.freeArguments)
    fn.setArgAttr(cast<BlockArgument>(arg).getArgNumber(), sbp::kArgLayout,
                  sbp::NdSbpAttr::get(ctx, layout));
  sbprt::NdSbp broadcast(mesh.getRank(), sbprt::Sbp::broadcast());
  for (BlockArgument arg : fn.getArguments())
    if (!fn.getArgAttr(arg.getArgNumber(), sbp::kArgLayout))
      fn.setArgAttr(arg.getArgNumber(), sbp::kArgLayout, sbp::NdSbpAttr::get(ctx, broadcast));
  fn->setAttr(sbp::kFuncMesh, FlatSymbolRefAttr::get(mesh.getSymNameAttr()));
}

} // namespace sbpc::search
