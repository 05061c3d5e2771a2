// The sbp dialect: layouts of tensors on device meshes.
#pragma once

#include "mlir/IR/Dialect.h"

#include "dialects/Sbp/IR/SbpDialect.h.inc"
