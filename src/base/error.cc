#include "src/base/error.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace hoccl {

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
