// One line for a JSON library's exception, for errors about files a user
// or sbpc compile wrote.
#pragma once

#include <exception>
#include <string>

namespace sbprt::io {

/// An exception's message without nlohmann's tag: "type must be number,
/// but is string" for "[json.exception.type_error.302] type must be ...".
inline std::string jsonErrorText(const std::exception &e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0)
    if (size_t tag = what.find("] "); tag != std::string::npos)
      return what.substr(tag + 2);
  return what;
}

} // namespace sbprt::io
