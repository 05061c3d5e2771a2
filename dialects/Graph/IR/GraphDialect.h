// The graph dialect: model graphs on global, statically shaped tensors.
#pragma once

#include "mlir/IR/Dialect.h"

#include "dialects/Graph/IR/GraphDialect.h.inc"
