// The tune file (HOCCL_TUNE_FILE): parse, then let the tuner use what was
// parsed on a small machine, as a communicator does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/tune/tuner.h"

using namespace hoccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  tune::TuneFile f;
  if (!tune::parseTuneFile(text, "fuzz.tune", tune::LinkModel{}, &f).ok()) return 0;
  const tune::Machine m = tune::Machine::rectangular(2, 2, 2, f.links);
  tune::Tuner t(m, f.rules, f.path, nullptr, 0);
  for (uint64_t b : {uint64_t(0), uint64_t(8), uint64_t(1) << 20, ~uint64_t(0) >> 8}) {
    for (CollKind c : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast})
      t.choose(c, b);
  }
  return 0;
}
