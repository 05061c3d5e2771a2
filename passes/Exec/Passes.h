// The exec passes: fusion of elementwise chains, static memory planning.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace sbpc::exec {

#define GEN_PASS_DECL
#include "passes/Exec/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Exec/Passes.h.inc"

} // namespace sbpc::exec
