// The device path (src/exec/cuda/device_executor.h) on a real GPU, through
// the public API (CTest label `gpu`; skips without a usable GPU): two ranks
// as threads share device 0, each with its own stream. The driver's entry
// points resolve; an all-reduce on device buffers is queued, completes on
// its stream and gives, bit for bit, what the same call gives on host
// buffers. Where the embedded image has no interpreter kernel of that name
// yet, the test stops there and says so (the path ran up to the lookup).
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "hoccl.h"
#include "src/base/cuda_driver.h"
#include "src/exec/cuda/device_api.h"
#include "tests/support/cuda_gpu.h"
#include "tests/support/harness.h"

namespace hoccl::gputest {
namespace {

// kRanks ranks all-reduce n floats in place on device buffers, then on
// host buffers; the two must agree bit for bit. (With fractions they
// would not always: the device may cut the data into more channels than
// the host, and a ring's order of additions follows the cut.)
void allReduceMatchesTheHost(Gpu* g, int kRanks, size_t n) {
  Arena mem(*g);
  std::vector<std::vector<float>> host(kRanks), out(kRanks);
  std::vector<DevPtr> dev(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    host[r].resize(n);
    // Whole numbers: every order of the sums gives the same bits, so the
    // device's channels (more than the host's) do not change the result.
    for (size_t i = 0; i < n; ++i) host[r][i] = float(int(i % 17) - 8) + float(r * 3);
    dev[r] = mem.alloc(n * sizeof(float));
    mem.upload(dev[r], host[r].data(), n * sizeof(float));
    out[r].assign(n, -1.0f);
  }
  ASSERT_TRUE(mem.ok()) << mem.error();
  std::mutex mu;
  std::string missingKernel;
  ASSERT_TRUE(testutil::runThreads(kRanks, [&](hocclComm_t comm, int rank) {
    void* d = reinterpret_cast<void*>(dev[rank]);
    const hocclResult_t rc = hocclAllReduce(d, d, n, hocclFloat32, hocclSum, comm, g->streams[rank]);
    const std::string err = hocclGetLastError(comm);
    if (rc == hocclInvalidArgument && err.find("have no hocclInterp_f32_sum") != std::string::npos) {
      std::lock_guard<std::mutex> lock(mu);
      missingKernel = err;
      return;
    }
    ASSERT_EQ(rc, hocclSuccess) << err;
    ASSERT_EQ(g->check(g->cu.streamSynchronize(g->streams[rank]), "cuStreamSynchronize"), "");
    hocclResult_t async = hocclInternalError;
    ASSERT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
    EXPECT_EQ(async, hocclSuccess) << hocclGetLastError(comm);
    int device = -1;
    EXPECT_EQ(hocclCommCuDevice(comm, &device), hocclSuccess);
    EXPECT_EQ(device, 0);
    ASSERT_EQ(hocclAllReduce(host[rank].data(), host[rank].data(), n, hocclFloat32, hocclSum, comm, nullptr),
              hocclSuccess);
  }));
  if (!missingKernel.empty()) GTEST_SKIP() << "ran up to the kernel lookup: " << missingKernel;
  for (int r = 0; r < kRanks; ++r) {
    mem.download(out[r].data(), dev[r], n * sizeof(float));
    ASSERT_TRUE(mem.ok()) << mem.error();
    EXPECT_EQ(std::memcmp(out[r].data(), host[r].data(), n * sizeof(float)), 0) << "rank " << r;
  }
}

TEST(GpuDevicePath, AllReduceOnDeviceBuffersMatchesTheHost) {
  HOCCL_GPU_OR_SKIP(g);
  cuda::DeviceApi api;
  const Status resolved = cuda::resolveDeviceApi(cuda::processDriver(), &api);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  allReduceMatchesTheHost(g, 2, 100003);
}

// 16 MiB per rank: the call spreads over many channels (CTAs), up to the
// GPU's multiprocessors shared by 4 ranks (HOCCL_DEVICE_CHANNELS=auto).
TEST(GpuDevicePath, ALargeAllReduceOnManyChannelsMatchesTheHost) {
  HOCCL_GPU_OR_SKIP(g);
  allReduceMatchesTheHost(g, 4, (size_t(1) << 22) + 5);
}

}  // namespace
}  // namespace hoccl::gputest
