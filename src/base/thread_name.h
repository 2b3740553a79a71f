// Names hoccl's own threads, so that top -H, perf and gdb tell them apart
// from the application's ("hoccl-net", "hoccl-init", ...). Linux keeps 15
// characters; a failure to name a thread is harmless and ignored.
#pragma once

#include <pthread.h>

namespace hoccl {

inline void nameThisThread(const char* name) { (void)pthread_setname_np(pthread_self(), name); }

}  // namespace hoccl
