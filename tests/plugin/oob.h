// The out-of-band channel two harness processes use to swap listen handles,
// as NCCL does over its bootstrap: rank 0 listens on MASTER_ADDR:port, rank 1
// connects; each exchange() sends our bytes and returns the peer's.
#pragma once

#include <string>

namespace pluginharness {

class Oob {
 public:
  // Blocks until the peer is there (at most timeoutSec). Rank 0 accepts on
  // `listenFd` when it is given (already listening), else binds addr:port.
  bool open(int rank, const std::string& addr, int port, double timeoutSec, std::string* err, int listenFd = -1);
  bool exchange(const void* mine, void* theirs, size_t bytes, std::string* err);
  ~Oob();

 private:
  int fd_ = -1;
};

// A socket listening on 127.0.0.1 at a port the kernel chose (*port): made
// before the peer process starts, so no other test can take the port.
int listenLocal(int* port);

}  // namespace pluginharness
