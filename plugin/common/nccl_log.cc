#include "plugin/common/nccl_log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <strings.h>

#include "base/config.h"
#include "base/log.h"

namespace hoccl {
namespace ncclplugin {
namespace {

std::atomic<ncclDebugLogger_t> logger{nullptr};

unsigned long ncclFlags(uint32_t subsys) {
  if (subsys & kSubNet) return NCCL_NET;
  if (subsys & kSubTune) return NCCL_TUNING;
  if (subsys & kSubInit) return NCCL_INIT;
  if (subsys & kSubEnv) return NCCL_ENV;
  return NCCL_ALL;
}

void toNccl(LogLevel level, uint32_t subsys, const char* file, int line, const char* msg) {
  ncclDebugLogger_t fn = logger.load();
  if (!fn) return;
  ncclDebugLogLevel l = level == LogLevel::Warn ? NCCL_LOG_WARN : level == LogLevel::Trace ? NCCL_LOG_TRACE : NCCL_LOG_INFO;
  fn(l, ncclFlags(subsys), file, line, "hoccl: %s", msg);
}

// NCCL filters by NCCL_DEBUG itself; formatting lines it would drop is waste.
LogLevel levelFromNcclDebug() {
  const char* v = getenv("NCCL_DEBUG");
  if (v && strcasecmp(v, "TRACE") == 0) return LogLevel::Trace;
  if (v && strcasecmp(v, "INFO") == 0) return LogLevel::Info;
  return LogLevel::Warn;
}

}  // namespace

void useNcclLogger(ncclDebugLogger_t fn) {
  if (!fn) return;
  logger = fn;
  // HOCCL_DEBUG set: hoccl's own log, as the user asked; else NCCL's.
  if (!processSettings()->fromEnvironment("HOCCL_DEBUG")) setLogSink(toNccl, levelFromNcclDebug());
}

void plog(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  ncclDebugLogger_t fn = logger.load();
  if (!fn) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(level, flags, file, line, "%s", msg);
}

}  // namespace ncclplugin
}  // namespace hoccl
