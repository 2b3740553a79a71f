// The scaffolding every NetTransport whose connect and accept are
// non-blocking state machines shares (as in NCCL's plugins): the
// connector's progress lives in the handle between connect() calls, made
// on the first call and freed once the connection exists or fails; a comm
// that comes out of a step is handed to the transport (adopt) and returned.
#pragma once

#include <cstring>

#include "base/error.h"

namespace hoccl {

// Handle: a trivially copyable struct with a `state` pointer, stored at
// the start of the peer's handle bytes. step(const Handle&, Comm**) makes
// what progress it can; newState() and destroyState(State*) make and free
// the state.
template <class Handle, class Comm, class NewState, class Step, class DestroyState, class Adopt>
Status connectStep(void* handle, NewState newState, Step step, DestroyState destroyState, Adopt adopt,
                   void** sendComm) {
  *sendComm = nullptr;
  Handle h;
  memcpy(&h, handle, sizeof h);
  if (!h.state) {
    h.state = newState();
    memcpy(handle, &h, sizeof h);
  }
  Comm* c = nullptr;
  Status st = step(h, &c);
  if (!st.ok() || c) {
    destroyState(h.state);
    h.state = nullptr;
    memcpy(handle, &h, sizeof h);
  }
  HOCCL_TRY(st);
  if (c) {
    adopt(c);
    *sendComm = c;
  }
  return Status();
}

// step(Comm**) makes what progress the accept can.
template <class Comm, class Step, class Adopt>
Status acceptStep(Step step, Adopt adopt, void** recvComm) {
  *recvComm = nullptr;
  Comm* c = nullptr;
  HOCCL_TRY(step(&c));
  if (c) {
    adopt(c);
    *recvComm = c;
  }
  return Status();
}

// A request tested done: the comm stops counting it and frees it (comm has
// `inflight` and `requests`, a vector of unique_ptr owning its requests).
template <class Comm, class Request>
void retireRequest(Comm* c, const Request* r) {
  --c->inflight;
  for (auto it = c->requests.begin(); it != c->requests.end(); ++it)
    if (it->get() == r) {
      c->requests.erase(it);
      return;
    }
}

}  // namespace hoccl
