// Logging: HOCCL_DEBUG picks the level, HOCCL_DEBUG_SUBSYS the subsystems,
// HOCCL_DEBUG_FILE the destination. Quiet unless asked.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace hoccl {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 5 };

enum Subsys : uint32_t {
  kSubInit = 1u << 0,
  kSubColl = 1u << 1,
  kSubBootstrap = 1u << 2,
  kSubShm = 1u << 3,
  kSubNet = 1u << 4,
  kSubTune = 1u << 5,
  kSubEnv = 1u << 6,
  kSubAll = ~0u,
};

bool logEnabled(LogLevel level, uint32_t subsys);
// False once logEnabled has found trace lines off (the trace lines on
// every call's path then cost one load); set again by setLogSink.
extern std::atomic<bool> traceMayLog;
void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// HOCCL_DEBUG_SUBSYS and HOCCL_DEBUG_FILE, for the settings table: "" when
// `value` is valid (the subsystems then in `mask`), else what is expected.
std::string parseLogSubsystems(const std::string& value, uint32_t* mask);
std::string checkLogFilePattern(const std::string& value);
// A file name from such a pattern (HOCCL_DEBUG_FILE, HOCCL_DEBUG_DUMP): %h
// the host name (up to its first dot), %p the pid, %% a percent sign; false
// for any other '%' sequence.
bool expandFilePattern(const std::string& pattern, std::string* out);

// The rank shown in log lines written by this thread (-1: none).
void setLogRank(int rank);

// A host program may take hoccl's log lines (the NCCL plugins hand them to
// NCCL's logger): while a sink is set, lines up to `level` go to it, already
// formatted, instead of to HOCCL_DEBUG's destination. nullptr restores that.
using LogSink = void (*)(LogLevel level, uint32_t subsys, const char* file, int line, const char* msg);
void setLogSink(LogSink sink, LogLevel level);

}  // namespace hoccl

#define HOCCL_LOG(level, subsys, ...)                                          \
  do {                                                                         \
    if (::hoccl::logEnabled(level, subsys))                                    \
      ::hoccl::logMessage(level, subsys, __FILE__, __LINE__, __VA_ARGS__);     \
  } while (0)
#define HWARN(subsys, ...) HOCCL_LOG(::hoccl::LogLevel::Warn, subsys, __VA_ARGS__)
#define HINFO(subsys, ...) HOCCL_LOG(::hoccl::LogLevel::Info, subsys, __VA_ARGS__)
#define HTRACE(subsys, ...)                                                    \
  do {                                                                         \
    if (::hoccl::traceMayLog.load(std::memory_order_relaxed))                  \
      HOCCL_LOG(::hoccl::LogLevel::Trace, subsys, __VA_ARGS__);                \
  } while (0)
