// The exact search: variable elimination over the layouts of values.
//
// A variable is a value some node reads; its domain is the layouts its
// producer's choices give it. Every node is a factor: a table over the
// layouts of the values it reads and defines, each entry the cheapest of
// its choices that defines those layouts, with the boxing of its inputs
// from the layouts in the entry. Eliminating a variable adds up the
// tables that mention it and keeps, per layout of the other values, the
// best of its layouts. Values of a chain have tables over two neighbours,
// so chains and leaves go first and the tables of parallel edges merge;
// the largest table, not the graph size, bounds the work (a transformer
// block's width does not grow with the number of blocks). The elimination
// is planned first on sizes alone, so that a graph over the budget is
// refused before any table is built. Back-substitution in reverse order
// reads the optimum's layouts, then each node's choice.
//
// Given a plan to hold values at, the planning holds instead of refusing:
// where a table would exceed the budget, the widest value in it takes the
// plan's layout (a domain of one), and the solve then eliminates in the
// planned order, whose tables the smaller domains only shrink. A training
// step's attention block is wide (its forward values wait for the
// backward), so one mesh axis of it alone can need tables of millions of
// entries; with the block's widest values held, the rest is still solved
// exactly.
#include "compiler/Search/SearchProblem.h"

#include <limits>
#include <numeric>
#include <queue>
#include <algorithm>

using namespace mlir;

namespace sbpc::search {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Var {
  int node = 0, output = 0;
  std::vector<int> domain; // layout ids, in first-seen order
  std::vector<std::pair<int, int>> position; // (layout id, index in domain), sorted

  int positionOf(int layout) const {
    return std::lower_bound(position.begin(), position.end(), std::make_pair(layout, 0))->second;
  }
  bool has(int layout) const {
    auto it = std::lower_bound(position.begin(), position.end(), std::make_pair(layout, 0));
    return it != position.end() && it->first == layout;
  }
};

struct Factor {
  std::vector<int> scope;     // variables
  std::vector<size_t> stride; // per scope variable
  std::vector<double> table;  // empty while planning
  size_t size = 0;
  bool alive = true;
};

class Eliminator {
public:
  Eliminator(SearchProblem &problem, const ExactBudget &budget,
             const std::vector<std::vector<size_t>> &allowed, HoldAt *hold)
      : problem(problem), budget(budget), allowed(allowed), hold(hold) {}

  std::optional<Solution> solve(std::string &error);

private:
  void buildVariables();
  bool buildNodeFactor(size_t n, std::string &error);
  double priority(int v);
  const std::vector<int> &liveFactorsOf(int v);
  bool eliminate(int v, std::string &error);
  bool eliminateAll(std::string &error);
  int addFactor(std::vector<int> scope, std::string &error,
                llvm::function_ref<std::string()> where);
  size_t tableSize(const std::vector<int> &scope) const;
  bool fits(size_t size, size_t extraWork) const;
  std::vector<int> eliminationScope(int v, std::vector<int> &involved);
  bool holdWidest(const std::vector<int> &scope);
  std::string describe(int v) const;
  bool overBudget(llvm::function_ref<std::string()> where, std::string &error) const;

  SearchProblem &problem;
  const ExactBudget &budget;
  const std::vector<std::vector<size_t>> &allowed;
  HoldAt *hold; // hold values at its plan rather than refuse
  std::vector<int> plannedOrder; // the variables in the order planned
  std::vector<Var> vars;
  std::vector<std::vector<int>> varOf; // [node][output] -> variable or -1
  std::vector<Factor> factors;
  std::vector<std::vector<int>> factorsOf; // variable -> factors mentioning it
  std::vector<size_t> mark;                // per variable, for priority()
  size_t markStamp = 0;
  std::vector<std::pair<int, std::vector<int>>> order; // eliminated variable, its factors
  size_t totalEntries = 0;
  size_t evaluated = 0;
  size_t work = 0;       // entries built and combined
  bool symbolic = false; // planning: scopes and sizes only, no tables
  // Reused buffers: eliminations and node tables are many and small.
  std::vector<int> scratchInvolved, scratchDigit;
  std::vector<size_t> scratchStride, scratchStrideV, scratchAt;
  std::vector<const double *> scratchTables;
  std::vector<double> scratchInputCost;
};

size_t Eliminator::tableSize(const std::vector<int> &scope) const {
  size_t size = 1;
  for (int v : scope) {
    size_t d = vars[v].domain.size();
    if (size > std::numeric_limits<size_t>::max() / d)
      return std::numeric_limits<size_t>::max();
    size *= d;
  }
  return size;
}

/// While planning holds values (`hold`): whether a new table of `size`
/// entries, and `extraWork` more combined, stays within the budget. A
/// table is also held to a share of the total per variable, and the
/// entries are paced: after eliminating a share of the variables, at most
/// that share of the total (plus an eighth), one entry kept for each
/// variable left. Otherwise the first blocks take what the last need.
bool Eliminator::fits(size_t size, size_t extraWork) const {
  if (work + size + extraWork > budget.maxWork)
    return false;
  double count = static_cast<double>(std::max<size_t>(vars.size(), 1));
  double perVariable = std::max(4096.0, 32.0 * budget.maxTotal / count);
  double share = std::min(1.0, (order.size() + count / 8) / count);
  return size <= std::min<double>(budget.maxTable, perVariable) &&
         totalEntries + size + (count - order.size()) <= budget.maxTotal * share;
}

/// Holds the widest value of `scope` at the plan's layout (among equally
/// wide ones, an order `hold->variant` scrambles, so that successive
/// solves free different values); false when every value there already
/// has a single layout.
bool Eliminator::holdWidest(const std::vector<int> &scope) {
  auto rank = [&](int u) {
    size_t scrambled = (static_cast<size_t>(u) + 1) * 0x9E3779B97F4A7C15ull * (hold->variant + 1);
    return std::make_pair(vars[u].domain.size(), scrambled >> 32);
  };
  int widest = -1;
  for (int u : scope)
    if (vars[u].domain.size() > 1 && (widest < 0 || rank(u) > rank(widest)))
      widest = u;
  if (widest < 0)
    return false;
  Var &var = vars[widest];
  const std::vector<size_t> &choices = allowed[var.node];
  size_t planned = hold->plan[var.node];
  size_t c = llvm::is_contained(choices, planned) ? planned : choices.front();
  int layout = problem.nodes()[var.node].outputLayout(c, var.output);
  var.domain = {layout};
  var.position = {{layout, 0}};
  ++hold->held;
  return true;
}

std::string Eliminator::describe(int v) const {
  const Node &node = problem.nodes()[vars[v].node];
  std::string text = "'" + node.name() + "'";
  if (node.op)
    text += " at " + sbp::describeLocation(node.op->getLoc());
  return text;
}

bool Eliminator::overBudget(llvm::function_ref<std::string()> where,
                            std::string &error) const {
  if (work <= budget.maxWork)
    return false;
  error = "exact search would combine more than " + std::to_string(budget.maxWork) +
          " table entries (at " + where() + "); the graph is too large for it (use --strategy auto)";
  return true;
}

int Eliminator::addFactor(std::vector<int> scope, std::string &error,
                          llvm::function_ref<std::string()> where) {
  size_t size = tableSize(scope);
  if (size > budget.maxTable || totalEntries + size > budget.maxTotal) {
    error = "exact search needs a table of " +
            (size == std::numeric_limits<size_t>::max() ? std::string("too many")
                                                        : std::to_string(size)) +
            " entries at " + where() + " (limit " + std::to_string(budget.maxTable) + ", " +
            std::to_string(budget.maxTotal) +
            " in all); the graph is too large for it (use --strategy auto)";
    return -1;
  }
  totalEntries += size;
  work += size;
  if (overBudget(where, error))
    return -1;
  Factor factor;
  factor.scope = std::move(scope);
  factor.size = size;
  size_t stride = 1;
  for (int v : factor.scope) {
    factor.stride.push_back(stride);
    stride *= vars[v].domain.size();
  }
  if (!symbolic)
    factor.table.assign(size, kInfinity);
  int id = static_cast<int>(factors.size());
  for (int v : factor.scope)
    factorsOf[v].push_back(id);
  factors.push_back(std::move(factor));
  return id;
}

void Eliminator::buildVariables() {
  const std::vector<Node> &nodes = problem.nodes();
  varOf.resize(nodes.size());
  std::vector<size_t> seen; // per layout id: the stamp of the variable that has it
  size_t stamp = 1;
  for (auto [n, node] : llvm::enumerate(nodes)) {
    varOf[n].assign(node.outputs.size(), -1);
    for (size_t r = 0; r < node.outputs.size(); ++r) {
      if (problem.uses(n, r).empty())
        continue;
      Var var;
      var.node = static_cast<int>(n);
      var.output = static_cast<int>(r);
      for (size_t c : allowed[n]) {
        int id = node.outputLayout(c, r);
        if (seen.size() <= static_cast<size_t>(id))
          seen.resize(id + 1, 0);
        if (seen[id] != stamp) {
          seen[id] = stamp;
          var.position.push_back({id, static_cast<int>(var.domain.size())});
          var.domain.push_back(id);
        }
      }
      ++stamp;
      std::sort(var.position.begin(), var.position.end());
      varOf[n][r] = static_cast<int>(vars.size());
      vars.push_back(std::move(var));
    }
  }
  factorsOf.resize(vars.size());
  mark.assign(vars.size(), 0);
}

bool Eliminator::buildNodeFactor(size_t n, std::string &error) {
  const Node &node = problem.nodes()[n];
  // The variables this node reads (once each), then those it defines.
  std::vector<int> inputVar(node.inputs.size(), -1);
  std::vector<int> reads;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Source &source = problem.source(n, k);
    if (source.node < 0)
      continue;
    inputVar[k] = varOf[source.node][source.output];
    if (llvm::find(reads, inputVar[k]) == reads.end())
      reads.push_back(inputVar[k]);
  }
  std::vector<int> scope = reads;
  for (int v : varOf[n])
    if (v >= 0)
      scope.push_back(v);
  auto where = [&] {
    return "'" + node.name() + "'" +
           (node.op ? " at " + sbp::describeLocation(node.op->getLoc()) : std::string());
  };
  while (symbolic && hold && !fits(tableSize(scope), 0) && holdWidest(scope)) {
  }
  int id = addFactor(scope, error, where);
  if (id < 0)
    return false;
  if (symbolic)
    return true;
  Factor &factor = factors[id];
  std::vector<size_t> inputPos(node.inputs.size(), 0), inputOffset(node.inputs.size(), 0);
  for (size_t k = 0; k < node.inputs.size(); ++k)
    if (inputVar[k] >= 0)
      inputPos[k] = llvm::find(reads, inputVar[k]) - reads.begin();
  for (size_t c : allowed[n]) {
    double base = problem.nodeCost(n, c);
    size_t resultIndex = 0;
    bool inDomains = true;
    for (size_t r = 0; r < node.outputs.size() && inDomains; ++r)
      if (int v = varOf[n][r]; v >= 0) {
        int layout = node.outputLayout(c, r);
        // A value held at one layout rules out the choices that define another.
        if (!(inDomains = vars[v].has(layout)))
          break;
        size_t at = llvm::find(scope, v) - scope.begin();
        resultIndex += factor.stride[at] * vars[v].positionOf(layout);
      }
    if (!inDomains)
      continue;
    // Boxing of each input per layout of its variable, at inputOffset[k].
    std::vector<double> &inputCost = scratchInputCost;
    inputCost.clear();
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Source &source = problem.source(n, k);
      inputOffset[k] = inputCost.size();
      if (source.node < 0) {
        base += problem.inputSeconds(n, k, c, source.fixed);
        continue;
      }
      for (int have : vars[inputVar[k]].domain)
        inputCost.push_back(problem.inputSeconds(n, k, c, have));
    }
    // Every assignment of the read variables.
    std::vector<int> digit(reads.size(), 0);
    while (true) {
      ++evaluated;
      double seconds = base;
      size_t index = resultIndex;
      for (size_t i = 0; i < reads.size(); ++i)
        index += factor.stride[i] * digit[i];
      for (size_t k = 0; k < node.inputs.size(); ++k)
        if (inputVar[k] >= 0)
          seconds += inputCost[inputOffset[k] + digit[inputPos[k]]];
      factor.table[index] = std::min(factor.table[index], seconds);
      size_t i = 0;
      while (i < reads.size() && ++digit[i] == static_cast<int>(vars[reads[i]].domain.size()))
        digit[i++] = 0;
      if (i == reads.size())
        break;
    }
  }
  return true;
}

/// The size of the table eliminating `v` would build.
double Eliminator::priority(int v) {
  ++markStamp;
  double size = 1;
  for (int f : liveFactorsOf(v))
    for (int u : factors[f].scope)
      if (u != v && mark[u] != markStamp) {
        mark[u] = markStamp;
        size *= static_cast<double>(vars[u].domain.size());
      }
  return size;
}

/// The live factors that mention `v`. Its list keeps growing as tables
/// are combined; the dead ones go here, once, so that a value read by
/// many ops (a parameter in every micro-batch) does not make each look at
/// it as slow as all it has ever been in.
const std::vector<int> &Eliminator::liveFactorsOf(int v) {
  llvm::erase_if(factorsOf[v], [&](int f) { return !factors[f].alive; });
  return factorsOf[v];
}

/// The scope of the table eliminating `v` would build, and the live
/// factors it would combine. A variable of one layout (held, or with one
/// choice) is left out: the table does not vary with it, and scopes that
/// kept every held value grew to thousands of variables on micro-batched
/// steps, each elimination then looking at all of them.
std::vector<int> Eliminator::eliminationScope(int v, std::vector<int> &involved) {
  std::vector<int> scope;
  involved.clear();
  ++markStamp;
  for (int f : liveFactorsOf(v))
    if (llvm::find(involved, f) == involved.end()) {
      involved.push_back(f);
      for (int u : factors[f].scope)
        if (u != v && mark[u] != markStamp) {
          mark[u] = markStamp;
          if (vars[u].domain.size() > 1)
            scope.push_back(u);
        }
    }
  return scope;
}

bool Eliminator::eliminate(int v, std::string &error) {
  std::vector<int> &involved = scratchInvolved;
  std::vector<int> scope = eliminationScope(v, involved);
  auto where = [&] { return "the value of " + describe(v); };
  int id = addFactor(scope, error, where);
  if (id < 0)
    return false;
  size_t domainV = vars[v].domain.size();
  work += factors[id].size * (domainV - 1);
  if (overBudget(where, error))
    return false;
  for (int f : involved)
    factors[f].alive = false;
  order.push_back({v, involved});
  if (symbolic)
    return true;
  // Strides of every involved factor along the new scope and along v
  // (stride[i * width + j]).
  const std::vector<int> &newScope = factors[id].scope;
  size_t width = newScope.size(), count = involved.size();
  std::vector<size_t> &stride = scratchStride, &strideV = scratchStrideV, &at = scratchAt;
  stride.assign(count * width, 0);
  strideV.assign(count, 0);
  at.assign(count, 0);
  for (size_t i = 0; i < count; ++i) {
    const Factor &factor = factors[involved[i]];
    for (size_t j = 0; j < factor.scope.size(); ++j) {
      int u = factor.scope[j];
      if (u == v)
        strideV[i] = factor.stride[j];
      else if (auto at = llvm::find(newScope, u); at != newScope.end())
        stride[i * width + (at - newScope.begin())] = factor.stride[j];
      // (else u has one layout, at offset 0)
    }
  }
  std::vector<int> &digit = scratchDigit;
  digit.assign(width, 0);
  std::vector<const double *> &tables = scratchTables;
  tables.clear();
  for (int f : involved)
    tables.push_back(factors[f].table.data());
  double *result = factors[id].table.data();
  for (size_t index = 0, size = factors[id].size; index < size; ++index) {
    double best = kInfinity;
    for (size_t d = 0; d < domainV; ++d) {
      double seconds = 0;
      for (size_t i = 0; i < count; ++i)
        seconds += tables[i][at[i] + d * strideV[i]];
      best = std::min(best, seconds);
    }
    evaluated += domainV;
    result[index] = best;
    // Next assignment of the scope (digit 0 fastest, as the table's strides).
    for (size_t j = 0; j < width; ++j) {
      for (size_t i = 0; i < count; ++i)
        at[i] += stride[i * width + j];
      if (++digit[j] < static_cast<int>(vars[newScope[j]].domain.size()))
        break;
      for (size_t i = 0; i < count; ++i)
        at[i] -= stride[i * width + j] * vars[newScope[j]].domain.size();
      digit[j] = 0;
    }
  }
  return true;
}

/// Builds every node's table, then eliminates every variable, cheapest
/// first; priorities go stale as neighbours go, so an entry is used only
/// when it is still the variable's current one.
bool Eliminator::eliminateAll(std::string &error) {
  for (size_t n = 0; n < problem.nodes().size(); ++n)
    if (!buildNodeFactor(n, error))
      return false;
  if (!symbolic) {
    // The planned order: with the values it held, no table is larger than planned.
    for (int v : plannedOrder)
      if (!eliminate(v, error))
        return false;
    return true;
  }
  using Entry = std::tuple<double, int, size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  std::vector<size_t> stamp(vars.size(), 0);
  std::vector<bool> done(vars.size(), false);
  for (size_t v = 0; v < vars.size(); ++v)
    queue.push({priority(static_cast<int>(v)), static_cast<int>(v), 0});
  while (!queue.empty()) {
    auto [p, v, s] = queue.top();
    queue.pop();
    if (done[v] || s != stamp[v])
      continue;
    if (symbolic && hold) {
      // Over the budget: hold the widest neighbour and look again, as the
      // cheapest variable may now be another.
      std::vector<int> scope = eliminationScope(v, scratchInvolved);
      size_t size = tableSize(scope);
      if (!fits(size, size * (vars[v].domain.size() - 1)) && holdWidest(scope)) {
        for (int u : scope) {
          ++stamp[u];
          queue.push({priority(u), u, stamp[u]});
        }
        ++stamp[v];
        queue.push({priority(v), v, stamp[v]});
        continue;
      }
    }
    if (!eliminate(v, error))
      return false;
    done[v] = true;
    for (int u : factors.back().scope) {
      ++stamp[u];
      queue.push({priority(u), u, stamp[u]});
    }
  }
  return true;
}

std::optional<Solution> Eliminator::solve(std::string &error) {
  const std::vector<Node> &nodes = problem.nodes();
  buildVariables();
  // Plan on sizes alone, then solve in the same order.
  for (bool planning : {true, false}) {
    symbolic = planning;
    factors.clear();
    order.clear();
    for (std::vector<int> &list : factorsOf)
      list.clear();
    totalEntries = work = 0;
    if (!eliminateAll(error))
      return std::nullopt;
    if (planning)
      plannedOrder.assign(llvm::make_first_range(order).begin(), llvm::make_first_range(order).end());
  }

  // Back-substitution: each variable's best layout given those eliminated after it.
  std::vector<int> assigned(vars.size(), -1);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    auto &[v, involved] = *it;
    double best = kInfinity;
    for (size_t d = 0; d < vars[v].domain.size(); ++d) {
      double seconds = 0;
      for (int f : involved) {
        const Factor &factor = factors[f];
        size_t index = 0;
        for (auto [j, u] : llvm::enumerate(factor.scope))
          index += factor.stride[j] * (u == v ? d : static_cast<size_t>(assigned[u]));
        seconds += factor.table[index];
      }
      if (seconds < best) {
        best = seconds;
        assigned[v] = static_cast<int>(d);
      }
    }
    if (assigned[v] < 0) {
      error = "exact search found no plan with the values it held";
      return std::nullopt;
    }
  }

  // Each node's cheapest choice that defines the assigned layouts.
  Solution solution;
  solution.choice.assign(nodes.size(), 0);
  for (auto [n, node] : llvm::enumerate(nodes)) {
    double best = kInfinity;
    for (size_t c : allowed[n]) {
      bool matches = true;
      for (size_t r = 0; r < node.outputs.size() && matches; ++r)
        if (int v = varOf[n][r]; v >= 0)
          matches = node.outputLayout(c, r) == vars[v].domain[assigned[v]];
      if (!matches)
        continue;
      double seconds = problem.nodeCost(n, c);
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        const Source &source = problem.source(n, k);
        int have = source.fixed;
        if (source.node >= 0) {
          const Var &var = vars[varOf[source.node][source.output]];
          have = var.domain[assigned[varOf[source.node][source.output]]];
        }
        seconds += problem.inputSeconds(n, k, c, have);
      }
      if (seconds < best) {
        best = seconds;
        solution.choice[n] = c;
      }
    }
  }
  solution.seconds = evaluate(problem, solution.choice);
  solution.candidatesEvaluated = evaluated;
  return solution;
}

} // namespace

std::optional<Solution> solveExact(SearchProblem &problem, const ExactBudget &budget,
                                   std::string &error,
                                   const std::vector<std::vector<size_t>> *allowed,
                                   HoldAt *hold) {
  std::vector<std::vector<size_t>> all;
  if (!allowed) {
    for (const Node &node : problem.nodes()) {
      all.emplace_back(node.numChoices());
      std::iota(all.back().begin(), all.back().end(), size_t(0));
    }
    allowed = &all;
  }
  Eliminator eliminator(problem, budget, *allowed, hold);
  return eliminator.solve(error);
}

} // namespace sbpc::search
