// The SBP passes: propagation and explicit boxing.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace sbpc::sbp {

#define GEN_PASS_DECL
#include "passes/Sbp/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Sbp/Passes.h.inc"

} // namespace sbpc::sbp
