// One-line diagnostics for the command-line tools.
#include "compiler/Support/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

static void printLocation(Location loc, llvm::raw_ostream &os) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    os << file.getFilename().getValue() << ":" << file.getLine() << ":" << file.getColumn()
       << ": ";
    return;
  }
  if (auto name = dyn_cast<NameLoc>(loc))
    return printLocation(name.getChildLoc(), os);
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    if (!fused.getLocations().empty())
      printLocation(fused.getLocations().front(), os);
    return;
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return printLocation(callSite.getCallee(), os);
  if (!isa<UnknownLoc>(loc))
    os << loc << ": ";
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

static void printDiagnostic(Diagnostic &diag, llvm::raw_ostream &os) {
  printLocation(diag.getLocation(), os);
  os << severityName(diag.getSeverity()) << ": " << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note, os);
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
