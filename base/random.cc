#include "base/random.h"

#include <fcntl.h>
#include <unistd.h>

#include "base/clock.h"

namespace hoccl {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t randomU64() {
  uint64_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &v, sizeof v) != sizeof v) v = 0;
    close(fd);
  }
  if (v == 0) v = fnv1a64(&fd, sizeof fd, static_cast<uint64_t>(nowSec() * 1e9) ^ getpid());
  return v;
}

}  // namespace hoccl
