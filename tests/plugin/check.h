// Failure reporting and the logger the harness hands to plugins (it plays
// NCCL's ncclDebugLog: prints with NCCL_DEBUG=INFO/WARN, counts warnings).
#pragma once

#include <atomic>
#include <cstdio>
#include <string>

#include "hoccl_nccl/common.h"

namespace pluginharness {

extern std::atomic<int> failures;
extern std::atomic<int> pluginWarnings;
extern std::string logPrefix;  // "[rank 0 net v12] "

void failf(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void notef(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

void harnessLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);

const char* resultName(ncclResult_t r);

}  // namespace pluginharness

// Records a failure and evaluates to false when `cond` does not hold.
#define EXPECT(cond, ...) ((cond) ? true : (::pluginharness::failf(__FILE__, __LINE__, __VA_ARGS__), false))
#define EXPECT_OK(call)                                                                                    \
  ([&] {                                                                                                   \
    ncclResult_t r_ = (call);                                                                              \
    return EXPECT(r_ == ncclSuccess, "%s returned %s", #call, ::pluginharness::resultName(r_));            \
  }())
