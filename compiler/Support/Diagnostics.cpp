// One-line diagnostics for the command-line tools.
#include "compiler/Support/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

std::string sbpc::bytesText(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return llvm::formatv(unit ? "{0:f1} {1}" : "{0:f0} {1}", bytes, units[unit]).str();
}

std::string sbpc::formatLocation(Location loc, bool fileNameOnly) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    StringRef name = file.getFilename().getValue();
    return ((fileNameOnly ? llvm::sys::path::filename(name) : name) + ":" +
            Twine(file.getLine()) + ":" + Twine(file.getColumn()))
        .str();
  }
  if (auto name = dyn_cast<NameLoc>(loc))
    return formatLocation(name.getChildLoc(), fileNameOnly);
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? ""
                                        : formatLocation(fused.getLocations().front(), fileNameOnly);
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return formatLocation(callSite.getCallee(), fileNameOnly);
  if (isa<UnknownLoc>(loc))
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << loc;
  return text;
}

static void printLocation(Location loc, llvm::raw_ostream &os) {
  std::string text = sbpc::formatLocation(loc);
  if (!text.empty())
    os << text << ": ";
}

static const char *severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

/// One line: the diagnostic, then its notes (the parser's "prior use
/// here", the registered dialects) in parentheses, so that one error stays
/// one line.
static void printDiagnostic(Diagnostic &diag, llvm::raw_ostream &os) {
  printLocation(diag.getLocation(), os);
  os << severityName(diag.getSeverity()) << ": " << diag.str();
  for (Diagnostic &note : diag.getNotes()) {
    os << " (note: ";
    printLocation(note.getLocation(), os);
    os << note.str() << ")";
  }
  os << "\n";
}

sbpc::OneLineDiagnostics::OneLineDiagnostics(MLIRContext *ctx) : ScopedDiagnosticHandler(ctx) {
  setHandler([](Diagnostic &diag) {
    printDiagnostic(diag, llvm::errs());
    return success();
  });
}

LogicalResult sbpc::reportError(const llvm::Twine &message) {
  llvm::errs() << "sbpc: error: " << message << "\n";
  return failure();
}
