// The alignment of an address, as cuBLASLt's algorithms state what they
// need: shared by the CUDA runtime (which tells cuBLASLt what its operands
// have) and the CUDA emulator (which checks it). Plain C++.
#pragma once

#include <cstdint>

namespace sbprt {

/// The largest power of two up to 256 that divides `p`'s address.
inline uint32_t alignmentOf(const void *p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align)
    align /= 2;
  return align;
}

} // namespace sbprt
