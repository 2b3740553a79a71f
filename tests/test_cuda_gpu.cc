// The embedded kernels on a real GPU (CTest label `gpu`; tools/run-gpu-tests.sh
// runs them). Every test skips, giving the driver's status line, where
// there is no usable GPU (no driver, the toolkit's stub, no device) or the
// build embeds no kernels. Here: the image loads and its kernels resolve,
// and the two data kernels give, bit for bit, what the host computes, at
// every size class and (for the copy) alignment. The interpreter kernels
// are test_cuda_gpu_interp.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/exec/cuda/image.h"
#include "src/exec/cuda/kernel_names.h"
#include "tests/support/cuda_gpu.h"

namespace hoccl::gputest {
namespace {

constexpr unsigned kThreads = 256;

// Blocks for `units` units of work, one per thread, at most 4 per SM (the
// kernels stride over the rest); at least one, so size 0 is launched too.
unsigned blocksFor(const Gpu& g, size_t units) {
  const size_t want = (units + kThreads - 1) / kThreads;
  return unsigned(std::clamp<size_t>(want, 1, size_t(g.sms) * 4));
}

// Finite floats of every magnitude, subnormals and signed zeros included
// (NaN payloads and inf - inf are where GPU and CPU may differ in bits).
std::vector<float> randomFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = uint32_t(rng());
    if ((bits & 0x7f800000u) == 0x7f800000u) bits &= 0xbfffffffu;  // no inf or NaN
    if (i % 97 == 0) bits &= 0x807fffffu;                            // a subnormal or a zero
    std::memcpy(&v[i], &bits, 4);
  }
  return v;
}

TEST(GpuKernels, EmbeddedImageLoadsAndEveryKernelResolves) {
  HOCCL_GPU_OR_SKIP(g);
  const cuda::KernelImage image = cuda::kernelImage();
  std::vector<cuda::FatbinEntry> entries;
  std::string why;
  ASSERT_TRUE(cuda::readFatbin(image.data, image.size, &entries, &why)) << why;
  // Machine code for this GPU, or PTX it can compile (an older one's).
  bool runnable = false;
  for (const cuda::FatbinEntry& e : entries)
    runnable = runnable || (e.ptx ? int(e.arch) <= g->cc : int(e.arch) == g->cc);
  EXPECT_TRUE(runnable) << "sm_" << g->cc << " is not served by " << cuda::describeEntries(entries);
  std::vector<std::string> names = {"hocclSumFloat", "hocclCopy"};
  for (int t = 0; t < kNumDTypes; ++t)
    for (int op = 0; op < kNumRedOps; ++op)
      if (!cuda::interpKernelName(DType(t), RedOp(op)).empty())
        names.push_back(cuda::interpKernelName(DType(t), RedOp(op)));
  EXPECT_EQ(names.size(), 52u);
  for (const std::string& name : names) {
    EXPECT_NE(g->function(name.c_str(), &why), nullptr) << why;
    EXPECT_EQ(why, "");
  }
  EXPECT_EQ(g->function("hocclNoSuchKernel", &why), nullptr);
  EXPECT_NE(why, "");  // CUDA_ERROR_NOT_FOUND: the lookup can fail
  printf("GPU: sm_%d, %d SMs; image: %s\n", g->cc, g->sms, image.archs);
}

// out = a + b, one plain float addition per element (no FMA, no
// reassociation), and not a float written past n.
TEST(GpuKernels, SumFloatMatchesTheHostBitForBit) {
  HOCCL_GPU_OR_SKIP(g);
  std::string why;
  Handle sum = g->function("hocclSumFloat", &why);
  ASSERT_NE(sum, nullptr) << why;
  constexpr size_t kGuard = 8;
  for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(4), size_t(5), size_t(1000), size_t(1001),
                   size_t(1) << 20, (size_t(1) << 20) + 3}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> a = randomFloats(n, 1 + n), b = randomFloats(n, 2 + 3 * n);
    const std::vector<float> init(n + kGuard, -7.0f);
    std::vector<float> want = init, got(n + kGuard);
    for (size_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
    Arena mem(*g);
    DevPtr da = mem.alloc(n * 4), db = mem.alloc(n * 4), dout = mem.alloc((n + kGuard) * 4);
    mem.upload(da, a.data(), n * 4);
    mem.upload(db, b.data(), n * 4);
    mem.upload(dout, init.data(), init.size() * 4);
    mem.sync();
    ASSERT_TRUE(mem.ok()) << mem.error();
    void* params[] = {&da, &db, &dout, &n};
    HOCCL_CU(g, g->cu.launchKernel(sum, blocksFor(*g, n / 4 + 1), 1, 1, kThreads, 1, 1, 0, g->streams[0], params,
                                   nullptr));
    HOCCL_CU(g, g->cu.streamSynchronize(g->streams[0]));
    mem.download(got.data(), dout, got.size() * 4);
    ASSERT_TRUE(mem.ok()) << mem.error();
    const auto diff = std::mismatch(want.begin(), want.end(), got.begin(), [](float x, float y) {
      return std::memcmp(&x, &y, 4) == 0;
    });
    ASSERT_TRUE(diff.first == want.end()) << "first difference at element " << (diff.first - want.begin())
                                          << ": host " << *diff.first << ", GPU " << *diff.second;
  }
}

// Every byte count class (0, below 16, odd, a multiple of 16 plus a tail,
// 1 MiB) at aligned and unaligned source and destination: the bytes asked
// for are copied, the bytes around them untouched.
TEST(GpuKernels, CopyMatchesTheHostAtEverySizeAndAlignment) {
  HOCCL_GPU_OR_SKIP(g);
  std::string why;
  Handle copy = g->function("hocclCopy", &why);
  ASSERT_NE(copy, nullptr) << why;
  const size_t sizes[] = {0, 1, 3, 4, 15, 16, 17, 1000, 1001, size_t(1) << 20, (size_t(1) << 20) + 7};
  const std::pair<size_t, size_t> offsets[] = {{0, 0}, {16, 48}, {1, 0}, {0, 3}, {5, 7}, {8, 8}};
  constexpr size_t kSlack = 64;
  const size_t maxBytes = (size_t(1) << 20) + 7 + kSlack;
  std::vector<unsigned char> src(maxBytes);
  std::mt19937_64 rng(42);
  for (unsigned char& c : src) c = static_cast<unsigned char>(rng());
  const std::vector<unsigned char> pattern(maxBytes, 0xee);
  Arena mem(*g);
  const DevPtr dsrc = mem.alloc(maxBytes), ddst = mem.alloc(maxBytes);
  mem.upload(dsrc, src.data(), maxBytes);
  ASSERT_TRUE(mem.ok()) << mem.error();
  std::vector<unsigned char> got(maxBytes);
  for (size_t bytes : sizes)
    for (const auto& [so, dof] : offsets) {
      SCOPED_TRACE("bytes=" + std::to_string(bytes) + " src+" + std::to_string(so) + " dst+" + std::to_string(dof));
      mem.upload(ddst, pattern.data(), maxBytes);
      mem.sync();
      ASSERT_TRUE(mem.ok()) << mem.error();
      DevPtr s = dsrc + so, d = ddst + dof;
      size_t n = bytes;
      void* params[] = {&s, &d, &n};
      HOCCL_CU(g, g->cu.launchKernel(copy, blocksFor(*g, n / 16 + 1), 1, 1, kThreads, 1, 1, 0, g->streams[0],
                                     params, nullptr));
      HOCCL_CU(g, g->cu.streamSynchronize(g->streams[0]));
      mem.download(got.data(), ddst, maxBytes);
      ASSERT_TRUE(mem.ok()) << mem.error();
      std::vector<unsigned char> want = pattern;
      std::memcpy(want.data() + dof, src.data() + so, bytes);
      const auto diff = std::mismatch(want.begin(), want.end(), got.begin());
      ASSERT_TRUE(diff.first == want.end()) << "first difference at destination byte " << (diff.first - want.begin())
                                            << " (copy starts at " << dof << ")";
    }
}

}  // namespace
}  // namespace hoccl::gputest
