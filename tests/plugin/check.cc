#include "tests/plugin/check.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pluginharness {

std::atomic<int> failures{0};
std::atomic<int> pluginWarnings{0};
std::string logPrefix;

namespace {
std::mutex printMutex;
}

void failf(const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  std::lock_guard<std::mutex> lock(printMutex);
  fprintf(stderr, "%sFAIL %s:%d: %s\n", logPrefix.c_str(), base ? base + 1 : file, line, msg);
  ++failures;
}

void notef(const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(printMutex);
  printf("%s%s\n", logPrefix.c_str(), msg);
  fflush(stdout);
}

void harnessLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  if (level == NCCL_LOG_WARN) ++pluginWarnings;
  const char* env = getenv("NCCL_DEBUG");
  bool show = env && (strcasecmp(env, "INFO") == 0 || strcasecmp(env, "TRACE") == 0 ||
                      (strcasecmp(env, "WARN") == 0 && level == NCCL_LOG_WARN));
  if (!show || level > NCCL_LOG_INFO) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(printMutex);
  fprintf(stderr, "%s%d NCCL %s %s\n", logPrefix.c_str(), getpid(), level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
  (void)flags;
  (void)file;
  (void)line;
}

const char* resultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
  }
  return "unknown result";
}

}  // namespace pluginharness
