#include "base/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/tls.h"

#include "base/config.h"
#include "base/regular_file.h"

namespace hoccl {
namespace {

struct LogState {
  LogLevel level = LogLevel::None;
  uint32_t subsys = kSubAll;
  FILE* out = stderr;
  char host[64] = {0};
};

const struct {
  const char* name;
  uint32_t bit;
} kSubsysNames[] = {{"INIT", kSubInit}, {"COLL", kSubColl}, {"BOOTSTRAP", kSubBootstrap},
                    {"SHM", kSubShm},   {"NET", kSubNet},   {"TUNE", kSubTune},
                    {"ENV", kSubEnv},   {"ALL", kSubAll}};

// HOCCL_DEBUG_SUBSYS: names separated by commas, a leading ^ inverting the
// set. Returns false with the first word that names no subsystem.
bool parseSubsys(const std::string& spec, uint32_t* out, std::string* badWord) {
  bool invert = !spec.empty() && spec[0] == '^';
  uint32_t mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string word = spec.substr(pos, comma - pos);
    bool known = false;
    for (const auto& n : kSubsysNames) {
      if (strcasecmp(word.c_str(), n.name) == 0) {
        mask |= n.bit;
        known = true;
      }
    }
    if (!known) {
      *badWord = word;
      return false;
    }
    pos = comma + 1;
  }
  *out = invert ? ~mask : mask;
  return true;
}

// HOCCL_DEBUG_FILE: %h is the host name, %p the pid, %% a percent sign.
// Returns false for any other '%' sequence.
bool expandPath(const std::string& pattern, const char* host, std::string* out) {
  out->clear();
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      *out += pattern[i];
      continue;
    }
    char c = i + 1 < pattern.size() ? pattern[++i] : '\0';
    if (c == 'h') *out += host;
    else if (c == 'p') *out += std::to_string(getpid());
    else if (c == '%') *out += '%';
    else return false;
  }
  return true;
}

LogState& state() {
  static LogState s = [] {
    LogState st;
    gethostname(st.host, sizeof st.host - 1);
    char* dot = strchr(st.host, '.');
    if (dot) *dot = '\0';
    // The settings table parsed these; a bad value left its default.
    std::shared_ptr<const SettingsSnapshot> snap = processSettings();
    st.level = snap->values().debugLevel;
    st.subsys = snap->values().debugSubsys;
    const std::string& file = snap->values().debugFile;
    if (st.level != LogLevel::None && !snap->problem("HOCCL_DEBUG_FILE").empty())
      fprintf(stderr, "hoccl: %s; logging to stderr\n", snap->problem("HOCCL_DEBUG_FILE").c_str());
    std::string path;
    if (!file.empty() && st.level != LogLevel::None && expandPath(file, st.host, &path)) {
      if (FILE* f = openForWriting(path)) {
        setvbuf(f, nullptr, _IOLBF, 0);
        st.out = f;
      } else {
        fprintf(stderr, "hoccl: cannot open HOCCL_DEBUG_FILE %s: %s; logging to stderr\n",
                path.c_str(), strerror(errno));
      }
    }
    return st;
  }();
  return s;
}

HOCCL_THREAD_LOCAL int tlsRank = -1;
std::mutex logMutex;
std::atomic<LogSink> sinkFn{nullptr};
std::atomic<int> sinkLevel{0};

}  // namespace

std::string parseLogSubsystems(const std::string& value, uint32_t* mask) {
  std::string bad;
  if (parseSubsys(value, mask, &bad)) return "";
  std::string names;
  for (const auto& n : kSubsysNames) names += std::string(names.empty() ? "" : ", ") + n.name;
  return "a comma-separated list of " + names + ", optionally after ^ (\"" + bad + "\" is none of them)";
}

std::string checkLogFilePattern(const std::string& value) {
  std::string path;
  if (expandPath(value, "host", &path)) return "";
  return "a file name where '%' is followed only by h (host name), p (pid) or % (a percent sign)";
}

bool expandFilePattern(const std::string& pattern, std::string* out) {
  return expandPath(pattern, state().host, out);
}

void setLogRank(int rank) { tlsRank = rank; }

void setLogSink(LogSink sink, LogLevel level) {
  sinkLevel = static_cast<int>(level);
  sinkFn = sink;
  traceMayLog.store(true, std::memory_order_relaxed);  // the next check decides again
}

std::atomic<bool> traceMayLog{true};

bool logEnabled(LogLevel level, uint32_t subsys) {
  if (sinkFn.load(std::memory_order_relaxed)) {
    if (sinkLevel.load() < static_cast<int>(LogLevel::Trace)) traceMayLog.store(false, std::memory_order_relaxed);
    return static_cast<int>(level) <= sinkLevel.load();
  }
  const LogState& s = state();
  if (s.level < LogLevel::Trace) traceMayLog.store(false, std::memory_order_relaxed);
  return static_cast<int>(level) <= static_cast<int>(s.level) && (s.subsys & subsys) != 0;
}

void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (LogSink sink = sinkFn.load()) {
    sink(level, subsys, file, line, msg);
    return;
  }
  LogState& s = state();
  const char* lv = level == LogLevel::Warn ? "WARN" : level == LogLevel::Info ? "INFO" : "TRACE";
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  long tid = syscall(SYS_gettid);
  std::lock_guard<std::mutex> lock(logMutex);
  if (level == LogLevel::Trace)
    fprintf(s.out, "%s:%d:%ld [%d] hoccl %s %s:%d %s\n", s.host, getpid(), tid, tlsRank, lv, base,
            line, msg);
  else
    fprintf(s.out, "%s:%d:%ld [%d] hoccl %s %s\n", s.host, getpid(), tid, tlsRank, lv, msg);
}

}  // namespace hoccl
