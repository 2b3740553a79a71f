// The special values of a binary floating format, as bits, for the tests
// that check every reduction commutes bit for bit (test_dataops.cc, the
// interpreter's test_cuda_interp_ops.cc).
#pragma once

#include <cstdint>
#include <vector>

namespace testutil {

// Both signs of: zero, the smallest and largest subnormal, the smallest
// normal, 1, 1 + ulp, 2, the largest finite value, infinity, quiet NaNs
// (bare, with payload 1, all ones) and signalling NaNs (payload 1, all
// ones below the quiet bit), for a format of e exponent and m mantissa bits.
inline std::vector<uint64_t> floatSpecialBits(int e, int m) {
  const uint64_t man = (uint64_t{1} << m) - 1, expAll = ((uint64_t{1} << e) - 1) << m;
  const uint64_t one = ((uint64_t{1} << (e - 1)) - 1) << m, quiet = uint64_t{1} << (m - 1);
  const uint64_t mags[] = {0,          1,      man,           man + 1,       one,         one + 1,
                           one + man + 1, (expAll - (man + 1)) | man, expAll, expAll | quiet, expAll | quiet | 1,
                           expAll | man,  expAll | 1,           expAll | (quiet - 1)};
  std::vector<uint64_t> v;
  for (uint64_t sign : {uint64_t{0}, uint64_t{1} << (e + m)})
    for (uint64_t x : mags) v.push_back(sign | x);
  return v;
}

}  // namespace testutil
