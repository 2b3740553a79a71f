#include "src/comm/comm_settings.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "algorithms/registry.h"

namespace hoccl {

constexpr int kMaxDeviceCTAs = 64;  // HOCCL_DEVICE_CHANNELS' range too

std::vector<std::string> algorithmChoices() {
  std::vector<std::string> names = {"auto"};
  for (const AlgoInfo& a : allAlgorithms()) names.push_back(a.name);
  return names;
}

std::string checkAlgorithmName(std::string* algo) {
  if (const AlgoInfo* a = findAlgorithm(algo->c_str())) {
    *algo = a->name;
    return "";
  }
  return expectOneOf(*algo, algorithmChoices());
}

namespace {

// Whether a caller's struct reaches to the end of `field` (callers built
// against an older header pass a smaller size and lack the later fields).
#define HOCCL_CONFIG_HAS(config, field) \
  ((config).size >= offsetof(hocclConfig_t, field) + sizeof((config).field))

// timeoutMs, when the struct has it and it is set, wins over timeoutSec: a
// caller may set both so that an older hoccl, which knows only timeoutSec,
// still gets a bound. Each set field must be positive either way.
Status applyTimeout(const hocclConfig_t& config, Settings* s) {
  const bool hasSec = HOCCL_CONFIG_HAS(config, timeoutSec) && config.timeoutSec != HOCCL_CONFIG_UNDEF_INT;
  const bool hasMs = HOCCL_CONFIG_HAS(config, timeoutMs) && config.timeoutMs != HOCCL_CONFIG_UNDEF_INT;
  if (hasSec && config.timeoutSec <= 0)
    return errorf(hocclInvalidArgument, "config->timeoutSec=%d must be > 0 (seconds)", config.timeoutSec);
  if (hasMs && config.timeoutMs <= 0)
    return errorf(hocclInvalidArgument, "config->timeoutMs=%d must be > 0 (milliseconds)", config.timeoutMs);
  if (hasMs) {
    s->timeoutSec = config.timeoutMs / 1000.0;
    s->timeoutFrom = "hocclConfig_t.timeoutMs";
  } else if (hasSec) {
    s->timeoutSec = config.timeoutSec;
    s->timeoutFrom = "hocclConfig_t.timeoutSec";
  }
  return Status();
}

}  // namespace

Status applyConfig(const hocclConfig_t* config, Settings* s) {
  if (!config) return Status();
  if (config->magic != 0xcafebeef || config->size < offsetof(hocclConfig_t, timeoutSec))
    return errorf(hocclInvalidArgument,
                  "config was not initialised with HOCCL_CONFIG_INITIALIZER (magic %#x, size %zu)",
                  config->magic, config->size);
  HOCCL_TRY(applyTimeout(*config, s));
  if (config->blocking != HOCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1)
    return errorf(hocclInvalidArgument, "config->blocking=%d must be 0 or 1", config->blocking);
  // The CTAs (channels) of a call on device buffers, as NCCL's config.
  // cgaClusterSize is accepted in NCCL's range and has no effect: hoccl's
  // kernels launch no thread-block clusters.
  const bool hasMin = config->minCTAs != HOCCL_CONFIG_UNDEF_INT, hasMax = config->maxCTAs != HOCCL_CONFIG_UNDEF_INT;
  if (hasMin && (config->minCTAs < 1 || config->minCTAs > kMaxDeviceCTAs))
    return errorf(hocclInvalidArgument, "config->minCTAs=%d must be from 1 to %d", config->minCTAs, kMaxDeviceCTAs);
  if (hasMax && (config->maxCTAs < 1 || config->maxCTAs > kMaxDeviceCTAs))
    return errorf(hocclInvalidArgument, "config->maxCTAs=%d must be from 1 to %d", config->maxCTAs, kMaxDeviceCTAs);
  if (hasMin && hasMax && config->minCTAs > config->maxCTAs)
    return errorf(hocclInvalidArgument, "config->minCTAs=%d is more than config->maxCTAs=%d", config->minCTAs,
                  config->maxCTAs);
  if (config->cgaClusterSize != HOCCL_CONFIG_UNDEF_INT && (config->cgaClusterSize < 0 || config->cgaClusterSize > 8))
    return errorf(hocclInvalidArgument, "config->cgaClusterSize=%d must be from 0 to 8", config->cgaClusterSize);
  if (hasMin) s->minCTAs = config->minCTAs;
  if (hasMax) s->maxCTAs = config->maxCTAs;
  // NCCL's names ("IB", "Socket") are HOCCL_NET's values in another case;
  // the row's parser ignores case.
  if (config->netName) {
    std::string why = settingDecl("HOCCL_NET").field.parse(config->netName, s);
    if (!why.empty())
      return errorf(hocclInvalidArgument, "config->netName=\"%s\" is invalid: expected %s", config->netName,
                    why.c_str());
  }
  // Callers built against a header without `algorithm` pass a smaller size.
  if (HOCCL_CONFIG_HAS(*config, algorithm) && config->algorithm) {
    std::string list;
    for (const std::string& n : algorithmChoices()) list += (list.empty() ? "" : ", ") + n;
    if (!applySetting(s, "HOCCL_ALGO", config->algorithm).empty() || !checkAlgorithmName(&s->algo).empty())
      return errorf(hocclInvalidArgument, "config->algorithm=\"%s\" names no algorithm (%s)", config->algorithm,
                    list.c_str());
  }
  return Status();
}

#undef HOCCL_CONFIG_HAS

hocclConfig_t copyConfig(const hocclConfig_t& config) {
  hocclConfig_t copy = HOCCL_CONFIG_INITIALIZER;
  memcpy(&copy, &config, std::min(config.size, sizeof copy));
  copy.size = config.size;
  copy.magic = config.magic;
  return copy;
}

Status commSettings(const hocclConfig_t* config, Settings* out) {
  std::shared_ptr<const SettingsSnapshot> snap = processSettings();
  if (!snap->error().empty()) return Status(hocclInvalidArgument, snap->error());
  Settings s = snap->values();
  s.timeoutFrom = snap->fromEnvironment("HOCCL_TIMEOUT") ? "HOCCL_TIMEOUT" : "HOCCL_TIMEOUT's default";
  std::string why = checkAlgorithmName(&s.algo);
  if (!why.empty()) return Status(hocclInvalidArgument, invalidSetting("HOCCL_ALGO", snap->text("HOCCL_ALGO"), why));
  HOCCL_TRY(applyConfig(config, &s));
  *out = s;
  return Status();
}

}  // namespace hoccl
