// The runtime's settings from the environment (SBPRT_*): plain C++, shared
// by the CPU and CUDA runtimes.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace sbprt {

/// The integer in environment variable `name` (decimal, a sign allowed,
/// nothing after it); std::nullopt when it is unset or empty, and when it
/// is not such an integer, which is said on stderr once per read (a typo
/// must not silently select the default).
inline std::optional<long long> envInteger(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(value, &end, 10);
  if (errno || *end) {
    std::fprintf(stderr, "sbprt: warning: %s='%s' is not an integer; ignored\n", name, value);
    return std::nullopt;
  }
  return parsed;
}

} // namespace sbprt
