// hoccl's own threads: named, so that top -H, perf and gdb tell them apart
// from the application's ("hoccl-net", "hoccl-init", ...; Linux keeps 15
// characters, and a failure to name one is harmless), and started so that
// a thread the system refuses is an error that names it, not an exception
// thrown through the C API.
#pragma once

#include <pthread.h>
#include <sys/resource.h>

#include <cstdio>
#include <system_error>
#include <thread>
#include <utility>

#include "base/error.h"

namespace hoccl {

inline void nameThisThread(const char* name) { (void)pthread_setname_np(pthread_self(), name); }

// Starts `*out` running f; `what` names the thread in the error ("the
// rendezvous thread").
template <class F>
Status startThread(const char* what, std::thread* out, F&& f) {
  try {
    *out = std::thread(std::forward<F>(f));
    return Status();
  } catch (const std::system_error& e) {
    rlimit l{};
    char limit[64] = "unlimited";
    if (getrlimit(RLIMIT_NPROC, &l) == 0 && l.rlim_cur != RLIM_INFINITY)
      snprintf(limit, sizeof limit, "%llu", static_cast<unsigned long long>(l.rlim_cur));
    return errorf(hocclSystemError,
                  "cannot start %s: %s (out of threads: RLIMIT_NPROC, ulimit -u, is %s; or the system's "
                  "kernel.threads-max or the cgroup's pids.max, or memory for its stack)",
                  what, e.what(), limit);
  }
}

}  // namespace hoccl
