// Reads a CUDA fatbin's table of contents. The layout (not documented by
// NVIDIA; the same as the CUDA runtime and cuobjdump read) is a 16-byte
// header {u32 magic 0xBA55ED50, u16 version 1, u16 header size, u64 size of
// the entries}, then entries {u16 kind (1 PTX, 2 ELF), u16 version, u32
// header size, u64 payload size, ..., u32 arch at offset 28}, each followed
// by its payload.
#include "src/exec/cuda/image.h"

#include <cstring>

namespace hoccl::cuda {
namespace {

template <typename T>
T load(const unsigned char* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

bool readFatbin(const unsigned char* data, size_t size, std::vector<FatbinEntry>* entries, std::string* why) {
  entries->clear();
  if (!data || size < 16) {
    *why = "shorter than a fatbin header";
    return false;
  }
  if (load<uint32_t>(data) != 0xBA55ED50u || load<uint16_t>(data + 4) != 1) {
    *why = "no fatbin magic 0xBA55ED50 version 1";
    return false;
  }
  const uint64_t headerSize = load<uint16_t>(data + 6), bodySize = load<uint64_t>(data + 8);
  if (headerSize < 16 || headerSize > size || bodySize > size - headerSize) {
    *why = "header sizes run past the end";
    return false;
  }
  const uint64_t end = headerSize + bodySize;
  for (uint64_t off = headerSize; off < end;) {
    if (end - off < 32) {
      *why = "truncated entry header";
      return false;
    }
    const unsigned char* e = data + off;
    const uint16_t kind = load<uint16_t>(e);
    const uint32_t entryHeader = load<uint32_t>(e + 4);
    const uint64_t payload = load<uint64_t>(e + 8);
    if (entryHeader < 32 || entryHeader > end - off || payload > end - off - entryHeader) {
      *why = "entry sizes run past the end";
      return false;
    }
    if (kind != 1 && kind != 2) {
      *why = "entry of unknown kind " + std::to_string(kind);
      return false;
    }
    entries->push_back({kind == 1, load<uint32_t>(e + 28), payload});
    off += entryHeader + payload;
  }
  return true;
}

std::string describeEntries(const std::vector<FatbinEntry>& entries) {
  std::string s;
  for (const FatbinEntry& e : entries) {
    if (!s.empty()) s += ' ';
    s += (e.ptx ? "compute_" : "sm_") + std::to_string(e.arch);
  }
  return s;
}

}  // namespace hoccl::cuda
