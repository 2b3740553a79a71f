#pragma once

#include <string>

namespace pluginharness {

struct NetCheckOptions {
  std::string plugin = "hoccl";  // as NCCL_NET_PLUGIN would say it
  int version = 12;              // which ncclNetPlugin_vN to drive
  int rank = 0;                  // of 2
  std::string addr = "127.0.0.1";  // rank 0's out-of-band address
  int port = 0;
  int listenFd = -1;             // rank 0: already listening for the out-of-band channel
  size_t maxBytes = 64u << 20;
  bool skipIfUnavailable = false;  // init failing (e.g. HOCCL_NET=ib, no port) exits 77: skipped
};

constexpr int kSkipped = 77;  // ctest's SKIP_RETURN_CODE

// 0 when every check passed.
int runNetCheck(const NetCheckOptions& o);

}  // namespace pluginharness
