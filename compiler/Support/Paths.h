// File paths as the driver builds them.
#pragma once

#include "compiler/Support/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
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

/// Whether `a` and `b` name the same file: the same file where both exist,
/// else the same absolute path once `.` and `..` are resolved.
inline bool samePath(const std::string &a, const std::string &b) {
  bool same = false;
  if (!llvm::sys::fs::equivalent(a, b, same))
    return same;
  llvm::SmallString<256> first(absolutePath(a)), second(absolutePath(b));
  llvm::sys::path::remove_dots(first, /*remove_dot_dot=*/true);
  llvm::sys::path::remove_dots(second, /*remove_dot_dot=*/true);
  return first == second;
}

/// Whether `path` lies under the directory `dir` (symbolic links resolved
/// where they exist, `.` and `..` otherwise).
inline bool isWithin(const std::string &path, const std::string &dir) {
  auto canonical = [](const std::string &p) {
    llvm::SmallString<256> real;
    if (llvm::sys::fs::real_path(p, real))
      real = absolutePath(p);
    llvm::sys::path::remove_dots(real, /*remove_dot_dot=*/true);
    return real;
  };
  llvm::SmallString<256> inner = canonical(path), outer = canonical(dir);
  return inner.size() > outer.size() && llvm::StringRef(inner).starts_with(outer) &&
         llvm::sys::path::is_separator(inner[outer.size()]);
}

/// Fails, naming both, when writing `dir`/NAME for a NAME of `written`
/// would replace a file the user gave (`inputs`: what was read, as given on
/// the command line); a NAME ending in '/' is a directory the command
/// writes or removes whole, so no input may lie in it. `dirFlag` is the
/// option that named `dir`.
inline mlir::LogicalResult refuseOverwritingInputs(const std::string &dirFlag,
                                                   const std::string &dir,
                                                   llvm::ArrayRef<std::string> written,
                                                   llvm::ArrayRef<std::string> inputs) {
  for (const std::string &name : written)
    for (const std::string &input : inputs) {
      if (input.empty() || !llvm::sys::fs::exists(input))
        continue;
      bool isDir = !name.empty() && name.back() == '/';
      if (isDir ? isWithin(input, joinPath(dir, name)) : samePath(joinPath(dir, name), input))
        return reportError(dirFlag + " " + dir + " would replace " + input + " (with its " +
                           name + "): write to another directory");
    }
  return mlir::success();
}

} // namespace sbpc
