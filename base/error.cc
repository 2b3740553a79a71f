#include "base/error.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace hoccl {

namespace {

// Names the resource behind an errno that says one ran out, so that
// "Too many open files" also says which limit and where to raise it.
std::string resourceHint(int err) {
  if (err == EMFILE) {
    rlimit l{};
    char buf[160];
    if (getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur != RLIM_INFINITY)
      snprintf(buf, sizeof buf, " (this process is out of file descriptors: RLIMIT_NOFILE, ulimit -n, is %llu)",
               static_cast<unsigned long long>(l.rlim_cur));
    else
      snprintf(buf, sizeof buf, " (this process is out of file descriptors)");
    return buf;
  }
  if (err == ENFILE) return " (the system is out of file descriptors: fs.file-max)";
  return "";
}

}  // namespace

Status errorf(hocclResult_t code, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return Status(code, buf);
}

Status sysErrorf(const char* fmt, ...) {
  int err = errno;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::string msg = buf;
  msg += ": ";
  msg += strerror(err);
  msg += resourceHint(err);
  return Status(hocclSystemError, msg);
}

const std::string& Status::emptyMessage() {
  static const std::string empty;
  return empty;
}

const char* resultName(hocclResult_t r) {
  switch (r) {
    case hocclSuccess: return "no error";
    case hocclUnhandledCudaError: return "unhandled cuda error";
    case hocclSystemError: return "unhandled system error";
    case hocclInternalError: return "internal error";
    case hocclInvalidArgument: return "invalid argument";
    case hocclInvalidUsage: return "invalid usage";
    case hocclRemoteError: return "remote process exited or there was a network error";
    case hocclInProgress: return "operation in progress";
    case hocclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

}  // namespace hoccl
