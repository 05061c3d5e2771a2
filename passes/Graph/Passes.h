// The graph passes: automatic differentiation.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace sbpc::graph {

#define GEN_PASS_DECL
#include "passes/Graph/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Graph/Passes.h.inc"

} // namespace sbpc::graph
