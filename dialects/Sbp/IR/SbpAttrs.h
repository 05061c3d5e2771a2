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

namespace sbpc::sbp {

/// `custom<NdSbp>($layout)` in assembly formats: a bare layout, `[S(0), B]`.
inline mlir::ParseResult parseNdSbp(mlir::OpAsmParser &parser, NdSbpAttr &layout) {
  layout = NdSbpAttr::parseBare(parser);
  return mlir::success(static_cast<bool>(layout));
}
inline void printNdSbp(mlir::OpAsmPrinter &printer, mlir::Operation *, NdSbpAttr layout) {
  layout.printBare(printer.getStream());
}

} // namespace sbpc::sbp
