// File paths as the driver builds them.
#pragma once

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <string>

namespace sbpc {

/// `dir`/`name`.
inline std::string joinPath(const llvm::Twine &dir, const llvm::Twine &name) {
  llvm::SmallString<256> path;
  dir.toVector(path);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

/// `path` made absolute against the working directory.
inline std::string absolutePath(const llvm::Twine &path) {
  llvm::SmallString<256> result;
  path.toVector(result);
  llvm::sys::fs::make_absolute(result);
  return result.str().str();
}

} // namespace sbpc
