// Out-of-band messages between the ranks of a communicator, beside the
// transports: what a transport needs to set up its connections (a listen
// handle, a segment name, every rank's pid). The bootstrap implements it;
// the transports see only this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace hoccl {

class OutOfBand {
 public:
  virtual ~OutOfBand() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // Tagged point-to-point messages: a recv returns the oldest message from
  // `peer` with `tag`, waiting for it (up to the bootstrap's timeout).
  virtual Status send(int peer, uint32_t tag, const void* data, size_t bytes) = 0;
  virtual Status recv(int peer, uint32_t tag, std::string* data) = 0;
  // `all` holds nranks() blocks of `bytes`; this rank's block is filled in.
  virtual Status allGather(void* all, size_t bytes) = 0;
  virtual Status barrier() = 0;
  // Called now and then (every 100 ms or so) while a transport waits for
  // `peer` during set-up outside recv (a connect or an accept in
  // progress). An error ends the wait with it: a peer's abort, or what the
  // owner's checks find (a peer that runs another call).
  virtual Status whileWaiting(int peer) {
    (void)peer;
    return Status();
  }
};

}  // namespace hoccl
