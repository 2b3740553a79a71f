// CUDA's virtual memory management (VMM) entry points of the device path:
// optional in DeviceApi (a driver without them still runs ranks that are
// threads of one process).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "hoccl.h"
#include "src/exec/cuda/device_api.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/harness.h"

namespace hoccl {
namespace {

using fakecuda::FakeCuda;

const std::set<std::string> kVmmNames = {
    "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
    "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cuMemAddressFree"};

TEST(CudaVmm, ADriverWithoutVmmStillResolvesAndNamesWhatItLacks) {
  FakeCuda fake(kVmmNames);
  cuda::DeviceApi api;
  const Status st = cuda::resolveDeviceApi(fake.driver(), &api);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(api.launchKernel != nullptr);
  EXPECT_FALSE(api.vmm.usable());
  EXPECT_TRUE(api.vmm.memMap == nullptr && api.vmm.memGetAllocationGranularity == nullptr);
  for (const std::string& name : kVmmNames)
    EXPECT_NE(api.vmmMissing.find(name), std::string::npos) << name << " not in: " << api.vmmMissing;
}

TEST(CudaVmm, ThreadRanksRunOnADriverWithoutVmm) {
  FakeCuda fake(kVmmNames);
  ASSERT_TRUE(testutil::runThreads(2, [&](hocclComm_t comm, int rank) {
    const size_t n = 1000;
    auto* d = static_cast<float*>(fake.alloc(n * sizeof(float)));
    for (size_t i = 0; i < n; ++i) d[i] = float(rank + 1) * float(i % 7);
    void* stream = fake.createStream();
    ASSERT_EQ(hocclAllReduce(d, d, n, hocclFloat32, hocclSum, comm, stream), hocclSuccess) << hocclGetLastError(comm);
    ASSERT_TRUE(fake.sync(stream));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 3.0f * float(i % 7)) << i;
    fake.free(d);
  }));
}

}  // namespace
}  // namespace hoccl
