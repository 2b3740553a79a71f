// Thread-local variables of the library, in the initial-exec TLS model.
//
// libhoccl is a shared library, so by default each access to a
// thread_local goes through __tls_get_addr (the general-dynamic model):
// callgrind put that at about 300 instructions per call on the small-call
// path (the group state, the last error, the log rank). Initial-exec
// reads the variable at a fixed offset from the thread pointer. It takes
// its room from the static TLS block, which glibc keeps a surplus of for
// libraries that are dlopen()ed later (the NCCL plugins, the torch
// extension); ours is a few words and a handful of empty containers.
#pragma once

#define HOCCL_THREAD_LOCAL thread_local __attribute__((tls_model("initial-exec")))
