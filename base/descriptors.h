// This process's file descriptors when they run out: a failed call that
// says so, and one descriptor held back so that a rank can still tell its
// peers why it stops (or hear why one of them did).
#pragma once

#include <functional>

#include "base/error.h"

namespace hoccl {

// Whether a failed call ran out of file descriptors (EMFILE or ENFILE; the
// message of sysErrorf carries the strerror text).
bool outOfDescriptors(const Status& st);

// One descriptor this process holds back (on /dev/null) for when it has run
// out, so that a rank can still accept or open the one connection that
// tells a peer why it stops, or hears why a peer stopped. Runs fn with
// that descriptor free; fn must close whatever it opened. One caller at a
// time, process-wide. False, fn not run, when the spare is gone (another
// thread took the slot the last time it was free) and cannot be had back.
bool withSpareDescriptor(const std::function<void()>& fn);

// Held around each of hoccl's own calls that opens a descriptor, so that
// none takes the slot withSpareDescriptor frees for its caller (a thread
// of the application still can).
class OpeningDescriptor {
 public:
  OpeningDescriptor();
  ~OpeningDescriptor();
  OpeningDescriptor(const OpeningDescriptor&) = delete;
  OpeningDescriptor& operator=(const OpeningDescriptor&) = delete;

 private:
  bool held_;
};

}  // namespace hoccl
