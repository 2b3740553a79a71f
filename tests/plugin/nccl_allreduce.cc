// One rank of an NCCL all-reduce on device buffers, for tools/run-gpu-tests.sh
// part (b): the installed NCCL, given hoccl's net and tuner plugins, with
// two processes on one GPU made two "hosts" by NCCL_HOSTID, so their
// traffic goes through the net plugin. NCCL and the driver are opened at
// run time, so this builds on machines that have neither.
//
//   hoccl-nccl-allreduce LIBNCCL RANK NRANKS ID_FILE [COUNT]
//
// Rank 0 writes the unique id to ID_FILE; the others wait for it. Each rank
// fills its buffer with rank+1 (floats), all-reduces in place (sum) and
// checks every element: nranks*(nranks+1)/2. Prints "rank R: ok" or why
// not; exit 0 only when correct.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct NcclId {
  char bytes[kIdBytes];
};
using Comm = void*;
using Stream = void*;
using DevPtr = unsigned long long;
constexpr int kNcclFloat32 = 7, kNcclSum = 0;  // ncclFloat32, ncclSum

template <class F>
F sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "hoccl-nccl-allreduce: %s not found: %s\n", name, dlerror());
    exit(2);
  }
  return reinterpret_cast<F>(p);
}

int die(int rank, const std::string& what) {
  printf("rank %d: FAILED: %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: hoccl-nccl-allreduce LIBNCCL RANK NRANKS ID_FILE [COUNT]\n");
    return 2;
  }
  const int rank = atoi(argv[2]), nranks = atoi(argv[3]);
  const std::string idFile = argv[4];
  const size_t count = argc > 5 ? strtoull(argv[5], nullptr, 10) : 1 << 20;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cuda) return die(rank, std::string("no CUDA driver: ") + dlerror());
  void* nccl = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!nccl) return die(rank, std::string("no NCCL: ") + dlerror());
  auto cuInit = sym<int (*)(unsigned)>(cuda, "cuInit");
  auto cuDeviceGet = sym<int (*)(int*, int)>(cuda, "cuDeviceGet");
  auto cuPrimaryCtxRetain = sym<int (*)(void**, int)>(cuda, "cuDevicePrimaryCtxRetain");
  auto cuCtxSetCurrent = sym<int (*)(void*)>(cuda, "cuCtxSetCurrent");
  auto cuMemAlloc = sym<int (*)(DevPtr*, size_t)>(cuda, "cuMemAlloc_v2");
  auto cuMemcpyHtoD = sym<int (*)(DevPtr, const void*, size_t)>(cuda, "cuMemcpyHtoD_v2");
  auto cuMemcpyDtoH = sym<int (*)(void*, DevPtr, size_t)>(cuda, "cuMemcpyDtoH_v2");
  auto cuStreamCreate = sym<int (*)(Stream*, unsigned)>(cuda, "cuStreamCreate");
  auto cuStreamSynchronize = sym<int (*)(Stream)>(cuda, "cuStreamSynchronize");
  auto getUniqueId = sym<int (*)(NcclId*)>(nccl, "ncclGetUniqueId");
  auto commInitRank = sym<int (*)(Comm*, int, NcclId, int)>(nccl, "ncclCommInitRank");
  auto allReduce = sym<int (*)(const void*, void*, size_t, int, int, Comm, Stream)>(nccl, "ncclAllReduce");
  auto commDestroy = sym<int (*)(Comm)>(nccl, "ncclCommDestroy");
  auto errorString = sym<const char* (*)(int)>(nccl, "ncclGetErrorString");
  int dev = 0;
  void* ctx = nullptr;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuPrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
    return die(rank, "the CUDA driver has no usable GPU 0");
  NcclId id{};
  if (rank == 0) {
    if (int rc = getUniqueId(&id)) return die(rank, std::string("ncclGetUniqueId: ") + errorString(rc));
    const std::string tmp = idFile + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.bytes, kIdBytes);
    rename(tmp.c_str(), idFile.c_str());
  } else {
    for (int i = 0; i < 600; ++i) {
      std::ifstream in(idFile, std::ios::binary);
      if (in.read(id.bytes, kIdBytes)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (i == 599) return die(rank, "no unique id from rank 0 in " + idFile);
    }
  }
  Comm comm = nullptr;
  if (int rc = commInitRank(&comm, nranks, id, rank)) return die(rank, std::string("ncclCommInitRank: ") + errorString(rc));
  DevPtr buf = 0;
  Stream stream = nullptr;
  std::vector<float> host(count, float(rank + 1));
  if (cuMemAlloc(&buf, count * sizeof(float)) || cuMemcpyHtoD(buf, host.data(), count * sizeof(float)) ||
      cuStreamCreate(&stream, 1))
    return die(rank, "device buffer set-up failed");
  const auto t0 = std::chrono::steady_clock::now();
  if (int rc = allReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), count, kNcclFloat32, kNcclSum,
                         comm, stream))
    return die(rank, std::string("ncclAllReduce: ") + errorString(rc));
  if (cuStreamSynchronize(stream)) return die(rank, "cuStreamSynchronize failed");
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (cuMemcpyDtoH(host.data(), buf, count * sizeof(float))) return die(rank, "cuMemcpyDtoH failed");
  const float want = float(nranks * (nranks + 1) / 2);
  size_t wrong = 0;
  for (float v : host) wrong += v != want;
  commDestroy(comm);
  if (wrong) return die(rank, std::to_string(wrong) + " of " + std::to_string(count) + " elements wrong");
  printf("rank %d: ok (%zu floats, %.0f us)\n", rank, count, us);
  return 0;
}
