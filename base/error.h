// One error model: internal functions return a Status (an hocclResult_t code
// plus a message with context); the C API turns it into a return code and a
// last-error string. No exception crosses the C boundary.
#pragma once

#include <memory>
#include <string>

#include "hoccl.h"

namespace hoccl {

class Status {
 public:
  // The usual case, success, is two words and no string: every call
  // passes through dozens of these.
  Status() = default;
  Status(hocclResult_t code, std::string msg)
      : code_(code), msg_(code == hocclSuccess && msg.empty() ? nullptr : new std::string(std::move(msg))) {}
  Status(const Status& o) : code_(o.code_), msg_(o.msg_ ? new std::string(*o.msg_) : nullptr) {}
  Status(Status&& o) noexcept = default;
  Status& operator=(const Status& o) {
    if (this != &o) *this = Status(o);
    return *this;
  }
  Status& operator=(Status&& o) noexcept = default;
  bool ok() const { return code_ == hocclSuccess; }
  hocclResult_t code() const { return code_; }
  const std::string& message() const { return msg_ ? *msg_ : emptyMessage(); }
  // Prepends context ("while connecting to rank 3: ...").
  Status& context(const std::string& what) {
    if (!ok()) msg_.reset(new std::string(what + ": " + message()));
    return *this;
  }

 private:
  static const std::string& emptyMessage();
  hocclResult_t code_ = hocclSuccess;
  std::unique_ptr<std::string> msg_;
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
