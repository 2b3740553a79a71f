// One error model: internal functions return a Status (an hocclResult_t code
// plus a message with context); the C API turns it into a return code and a
// last-error string. No exception crosses the C boundary.
#pragma once

#include <string>

#include "hoccl.h"

namespace hoccl {

class Status {
 public:
  Status() = default;
  Status(hocclResult_t code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  bool ok() const { return code_ == hocclSuccess; }
  hocclResult_t code() const { return code_; }
  const std::string& message() const { return msg_; }
  // Prepends context ("while connecting to rank 3: ...").
  Status& context(const std::string& what) {
    if (!ok()) msg_ = what + ": " + msg_;
    return *this;
  }

 private:
  hocclResult_t code_ = hocclSuccess;
  std::string msg_;
};

Status errorf(hocclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A system error with strerror(errno) appended.
Status sysErrorf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

const char* resultName(hocclResult_t r);

}  // namespace hoccl

#define HOCCL_TRY(expr)                      \
  do {                                       \
    ::hoccl::Status _st = (expr);            \
    if (!_st.ok()) return _st;               \
  } while (0)
