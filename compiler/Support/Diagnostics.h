// One-line diagnostics for the command-line tools: `file:line:col: error: message`.
#pragma once

#include "mlir/IR/Diagnostics.h"

namespace sbpc {

/// Prints every diagnostic of `ctx` as one line on stderr (its notes in
/// parentheses on the same line), without echoing the source line, while
/// the handler lives.
class OneLineDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  explicit OneLineDiagnostics(mlir::MLIRContext *ctx);
};

/// "file:line:col" for a location (the file's name alone with
/// `fileNameOnly`); empty when the location says nothing.
std::string formatLocation(mlir::Location loc, bool fileNameOnly = false);

/// "512 B", "1.5 KiB", "80.0 GiB": bytes as a person reads them in a message.
std::string bytesText(double bytes);

/// Reports an error that has no place in the IR (a file, an option) as
/// `sbpc: error: message` and returns failure.
mlir::LogicalResult reportError(const llvm::Twine &message);

} // namespace sbpc
