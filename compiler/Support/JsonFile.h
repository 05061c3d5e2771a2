// Parsing a JSON file a user gave, with a one-line error that says where.
#pragma once

#include "runtime/io/JsonText.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>

namespace sbpc {

using sbprt::io::jsonErrorText;

/// `text` (the contents of `path`) parsed, or nullopt with `error` set to
/// "PATH:LINE:COLUMN: not valid JSON (WHAT)", as compilers place errors.
inline std::optional<nlohmann::json> parseJson(const std::string &text, const std::string &path,
                                               std::string &error) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    // e.byte: the offending character's position, counted from 1.
    size_t at = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t lineStart = text.rfind('\n', at == 0 ? 0 : at - 1);
    lineStart = lineStart == std::string::npos || at == 0 ? 0 : lineStart + 1;
    size_t line = 1 + std::count(text.begin(), text.begin() + lineStart, '\n');
    size_t column = at - lineStart + 1;
    // "[json.exception.parse_error.101] parse error at line 3, column 5:
    // syntax error while parsing value - invalid literal; last read: 'x'"
    // without the tag, the position (placed as compilers place it) and what
    // it last read (lines of the file, which the position points into).
    // (After the tag, "parse error at line 3, column 5: ".)
    std::string what = jsonErrorText(e);
    if (size_t colon = what.find(": "); colon != std::string::npos)
      what = what.substr(colon + 2);
    // (What it read may itself hold "'; ": the last "'; expected" ends it,
    // else the message does.)
    if (size_t read = what.find("; last read: '"); read != std::string::npos) {
      size_t expected = what.rfind("'; expected ");
      what = what.substr(0, read) +
             (expected == std::string::npos || expected < read ? "" : what.substr(expected + 1));
    }
    error = path + ":" + std::to_string(line) + ":" + std::to_string(column) +
            ": not valid JSON (" + what + ")";
    return std::nullopt;
  } catch (const nlohmann::json::exception &e) {
    // A number beyond a double ("number overflow parsing '1e400'"), which
    // the parser reports without a position.
    error = path + ": not valid JSON (" + jsonErrorText(e) + ")";
    return std::nullopt;
  }
}

} // namespace sbpc
