// Hashing and random identifiers (job magics, connection ids, PSNs).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hoccl {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);
// From /dev/urandom; falls back to the time and pid. Never 0.
uint64_t randomU64();

}  // namespace hoccl
