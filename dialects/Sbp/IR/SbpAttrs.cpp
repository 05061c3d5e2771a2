// Parsing, printing and verification of SBP attributes.
#include "dialects/Sbp/IR/SbpAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace sbpc::sbp;

#include "dialects/Sbp/IR/SbpEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Sbp/IR/SbpAttrs.cpp.inc"

void SbpDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Sbp/IR/SbpAttrs.cpp.inc"
      >();
}

SbpAttr SbpAttr::parseBare(AsmParser &parser) {
  MLIRContext *ctx = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  StringRef kind;
  if (parser.parseKeyword(&kind))
    return {};
  if (kind == "B")
    return broadcast(ctx);
  if (kind == "S") {
    int64_t dim = 0;
    if (parser.parseLParen() || parser.parseInteger(dim) || parser.parseRParen())
      return {};
    return parser.getChecked<SbpAttr>(loc, ctx, SbpKind::Split, dim, ReduceKind::Sum);
  }
  if (kind == "P") {
    StringRef reduce;
    SMLoc reduceLoc = parser.getCurrentLocation();
    if (parser.parseLParen() || parser.parseKeyword(&reduce) || parser.parseRParen())
      return {};
    std::optional<ReduceKind> reduceKind = symbolizeReduceKind(reduce);
    if (!reduceKind) {
      parser.emitError(reduceLoc) << "unknown partial reduction '" << reduce
                                  << "', expected 'sum' or 'max'";
      return {};
    }
    return partial(ctx, *reduceKind);
  }
  parser.emitError(loc) << "unknown SBP '" << kind << "', expected B, S(dim) or P(sum|max)";
  return {};
}

void SbpAttr::printBare(raw_ostream &os) const { os << toSbp().str(); }

Attribute SbpAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  SbpAttr attr = parseBare(parser);
  if (!attr || parser.parseGreater())
    return {};
  return attr;
}

void SbpAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printBare(printer.getStream());
  printer << ">";
}

LogicalResult SbpAttr::verify(function_ref<InFlightDiagnostic()> emitError, SbpKind kind,
                              int64_t dim, ReduceKind) {
  if (kind == SbpKind::Split && dim < 0)
    return emitError() << "split dimension must be non-negative, got " << dim;
  return success();
}

NdSbpAttr NdSbpAttr::parseBare(AsmParser &parser) {
  SmallVector<SbpAttr> axes;
  SMLoc loc = parser.getCurrentLocation();
  auto parseOne = [&]() -> ParseResult {
    SbpAttr one = SbpAttr::parseBare(parser);
    if (!one)
      return failure();
    axes.push_back(one);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne))
    return {};
  return parser.getChecked<NdSbpAttr>(loc, parser.getContext(), axes);
}

void NdSbpAttr::printBare(raw_ostream &os) const { os << sbprt::toString(toLayout()); }

Attribute NdSbpAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  NdSbpAttr attr = parseBare(parser);
  if (!attr || parser.parseGreater())
    return {};
  return attr;
}

void NdSbpAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printBare(printer.getStream());
  printer << ">";
}

LogicalResult NdSbpAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                ArrayRef<SbpAttr> axes) {
  if (axes.empty())
    return emitError() << "an nd-SBP needs one entry per mesh axis, got none";
  return success();
}

sbprt::Sbp SbpAttr::toSbp() const {
  switch (getKind()) {
  case SbpKind::Broadcast:
    return sbprt::Sbp::broadcast();
  case SbpKind::Split:
    return sbprt::Sbp::split(getDim());
  case SbpKind::Partial:
    return sbprt::Sbp::partial(getReduce() == ReduceKind::Sum ? sbprt::Sbp::Reduce::Sum
                                                              : sbprt::Sbp::Reduce::Max);
  }
  return {};
}

sbprt::NdSbp NdSbpAttr::toLayout() const {
  sbprt::NdSbp layout;
  for (SbpAttr axis : getAxes())
    layout.push_back(axis.toSbp());
  return layout;
}

NdSbpAttr NdSbpAttr::get(MLIRContext *ctx, const sbprt::NdSbp &layout) {
  SmallVector<SbpAttr> axes;
  for (const sbprt::Sbp &sbp : layout) {
    SbpKind kind = sbp.isSplit() ? SbpKind::Split : sbp.isPartial() ? SbpKind::Partial : SbpKind::Broadcast;
    ReduceKind reduce = sbp.reduce == sbprt::Sbp::Reduce::Sum ? ReduceKind::Sum : ReduceKind::Max;
    axes.push_back(SbpAttr::get(ctx, kind, sbp.dim, reduce));
  }
  return get(ctx, axes);
}
