// SBP layout attributes: 1-D SBP and nd-SBP.
#pragma once

#include "dialects/Sbp/IR/SbpDialect.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "runtime/Layout.h"

#include "dialects/Sbp/IR/SbpEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Sbp/IR/SbpAttrs.h.inc"
