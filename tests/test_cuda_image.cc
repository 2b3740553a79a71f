// The embedded kernel image: present with the architectures configured when
// the build has the CUDA Toolkit, absent otherwise; and the fatbin reader
// that says so, on good and broken bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "src/exec/cuda/image.h"
#include "src/exec/cuda/kernel_names.h"

using namespace hoccl::cuda;

namespace {

// A fatbin with the given entries (kind 1 PTX / 2 ELF, arch, payload size).
std::vector<unsigned char> makeFatbin(const std::vector<FatbinEntry>& entries) {
  std::vector<unsigned char> body;
  for (const FatbinEntry& e : entries) {
    unsigned char h[64] = {0};
    uint16_t kind = e.ptx ? 1 : 2, version = 0x101;
    uint32_t headerSize = sizeof h, arch = e.arch;
    memcpy(h, &kind, 2);
    memcpy(h + 2, &version, 2);
    memcpy(h + 4, &headerSize, 4);
    memcpy(h + 8, &e.bytes, 8);
    memcpy(h + 28, &arch, 4);
    body.insert(body.end(), h, h + sizeof h);
    body.insert(body.end(), e.bytes, 0xab);
  }
  std::vector<unsigned char> out(16 + body.size());
  uint32_t magic = 0xBA55ED50;
  uint16_t version = 1, headerSize = 16;
  uint64_t size = body.size();
  memcpy(out.data(), &magic, 4);
  memcpy(out.data() + 4, &version, 2);
  memcpy(out.data() + 6, &headerSize, 2);
  memcpy(out.data() + 8, &size, 8);
  if (!body.empty()) memcpy(out.data() + 16, body.data(), body.size());
  return out;
}

}  // namespace

TEST(CudaImage, ReadsEntriesOfAFatbin) {
  auto bin = makeFatbin({{false, 80, 100}, {false, 90, 7}, {true, 90, 33}});
  std::vector<FatbinEntry> e;
  std::string why;
  ASSERT_TRUE(readFatbin(bin.data(), bin.size(), &e, &why)) << why;
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[1].arch, 90u);
  EXPECT_EQ(e[1].bytes, 7u);
  EXPECT_TRUE(e[2].ptx);
  EXPECT_EQ(describeEntries(e), "sm_80 sm_90 compute_90");
}

TEST(CudaImage, RejectsBrokenFatbins) {
  std::vector<FatbinEntry> e;
  std::string why;
  auto bin = makeFatbin({{false, 80, 100}});
  EXPECT_FALSE(readFatbin(bin.data(), 10, &e, &why));
  auto wrongMagic = bin;
  wrongMagic[0] ^= 1;
  EXPECT_FALSE(readFatbin(wrongMagic.data(), wrongMagic.size(), &e, &why));
  EXPECT_NE(why.find("magic"), std::string::npos) << why;
  // Cut inside the payload: the header's sizes now run past the end.
  EXPECT_FALSE(readFatbin(bin.data(), bin.size() - 1, &e, &why));
  EXPECT_NE(why.find("past the end"), std::string::npos) << why;
  // An entry claiming more payload than the fatbin holds.
  auto tooLong = bin;
  uint64_t huge = 1000;
  memcpy(tooLong.data() + 16 + 8, &huge, 8);
  EXPECT_FALSE(readFatbin(tooLong.data(), tooLong.size(), &e, &why));
  auto badKind = bin;
  badKind[16] = 7;
  EXPECT_FALSE(readFatbin(badKind.data(), badKind.size(), &e, &why));
  EXPECT_NE(why.find("kind 7"), std::string::npos) << why;
}

#ifdef HOCCL_TEST_CUDA_ARCHS
// The build's image (HOCCL_TEST_CUDA_ARCHS: "80,90,100") holds machine code for every configured architecture and
// the PTX of the last, and its kernels by name.
TEST(CudaImage, EmbeddedKernelsCoverTheConfiguredArchitectures) {
  KernelImage k = kernelImage();
  ASSERT_NE(k.data, nullptr);
  std::vector<FatbinEntry> e;
  std::string why;
  ASSERT_TRUE(readFatbin(k.data, k.size, &e, &why)) << why;
  std::string expected, last;
  for (const char* p = HOCCL_TEST_CUDA_ARCHS; *p;) {
    const char* end = strchrnul(p, ',');
    last.assign(p, end);
    expected += (expected.empty() ? "sm_" : " sm_") + last;
    p = *end ? end + 1 : end;
  }
  expected += " compute_" + last;
  // nvcc orders the entries its own way.
  std::sort(e.begin(), e.end(), [](const FatbinEntry& a, const FatbinEntry& b) {
    return a.arch != b.arch ? a.arch < b.arch : a.ptx < b.ptx;
  });
  EXPECT_EQ(describeEntries(e), expected);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(k.data) % 8, 0u) << "the driver wants an 8-byte aligned image";
  std::string bytes(reinterpret_cast<const char*>(k.data), k.size);
  std::vector<std::string> kernels = {"hocclSumFloat", "hocclCopy"};
  // Every interpreter kernel kernel_names.h names (the executor looks them up
  // by these names), and the host interpreter runs the same pairs.
  for (int t = 0; t < hoccl::kNumDTypes; ++t)
    for (int op = 0; op < hoccl::kNumRedOps; ++op) {
      const std::string name = interpKernelName(hoccl::DType(t), hoccl::RedOp(op));
      if (!name.empty()) kernels.push_back(name);
    }
  EXPECT_EQ(kernels.size(), 52u);
  for (const std::string& kernel : kernels)
    EXPECT_NE(bytes.find(kernel + '\0'), std::string::npos) << kernel << " is not in the image";
}
#else
TEST(CudaImage, NothingEmbeddedWithoutTheToolkit) {
  KernelImage k = kernelImage();
  EXPECT_EQ(k.data, nullptr);
  EXPECT_EQ(k.size, 0u);
}
#endif
