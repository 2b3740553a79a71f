// One rank of GpuDevicePath.RanksInSeparateProcessesMatchTheHost
// (test_cuda_gpu_device.cc): a process the test starts with posix_spawn,
// not fork, so that CUDA starts fresh in it (a child forked after its
// parent started the driver cannot use the GPU). Ranks of different
// processes on one GPU connect through CUDA VMM (transport/p2p/ipc.h): the
// receiver exports its connection memory as a POSIX fd, the sender maps it.
//
//   test_cuda_gpu_rank <rank> <nranks>     (HOCCL_COMM_ID=host:port set)
//
// Each case runs on device buffers on a stream, then on host buffers with
// the same communicator; the two results must agree bit for bit (whole
// numbers, so no order of additions changes them). Exit 0 when every case
// agrees; 1 with each difference printed; 2 no usable GPU (the reason
// printed); 3 bad arguments or a failed init.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hoccl.h"
#include "tests/support/cuda_gpu.h"

namespace {

using hoccl::gputest::Arena;
using hoccl::gputest::DevPtr;
using hoccl::gputest::Gpu;

enum class Coll { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll };

struct Case {
  const char* name;
  Coll coll;
  hocclDataType_t type;
  size_t elemBytes;
  hocclRedOp_t op;
  size_t count;  // per rank: recvcount of reduce-scatter, sendcount of all-gather; per peer: all-to-all
  bool inPlace;
  int root;
};

// A whole number, different on every rank, that fits every type used.
double valueAt(size_t i, int rank) { return double(int(i % 17) - 8 + rank * 3); }

void fill(std::vector<unsigned char>* bytes, hocclDataType_t type, int rank) {
  const size_t n = bytes->size();
  for (size_t i = 0;; ++i) {
    const double v = valueAt(i, rank);
    unsigned char* p = bytes->data();
    switch (type) {
      case hocclFloat32: {
        if ((i + 1) * 4 > n) return;
        const float f = float(v);
        std::memcpy(p + i * 4, &f, 4);
        break;
      }
      case hocclFloat64: {
        if ((i + 1) * 8 > n) return;
        std::memcpy(p + i * 8, &v, 8);
        break;
      }
      case hocclInt32: {
        if ((i + 1) * 4 > n) return;
        const int32_t x = int32_t(v);
        std::memcpy(p + i * 4, &x, 4);
        break;
      }
      default: {  // hocclUint8
        if (i + 1 > n) return;
        p[i] = static_cast<unsigned char>(int(v) & 0xff);
        break;
      }
    }
  }
}

hocclResult_t call(const Case& c, const void* in, void* out, hocclComm_t comm, void* stream) {
  switch (c.coll) {
    case Coll::AllReduce: return hocclAllReduce(in, out, c.count, c.type, c.op, comm, stream);
    case Coll::ReduceScatter: return hocclReduceScatter(in, out, c.count, c.type, c.op, comm, stream);
    case Coll::AllGather: return hocclAllGather(in, out, c.count, c.type, comm, stream);
    case Coll::Broadcast: return hocclBroadcast(in, out, c.count, c.type, c.root, comm, stream);
    case Coll::AllToAll: return hocclAlltoAll(in, out, c.count, c.type, comm, stream);
  }
  return hocclInternalError;
}

// "" when the device and the host agree, else what differs.
std::string runCase(Gpu* g, const Case& c, hocclComm_t comm, int rank, int nranks) {
  const bool a2a = c.coll == Coll::AllToAll;
  const size_t inElems = c.coll == Coll::ReduceScatter || a2a ? c.count * nranks : c.count;
  const size_t outElems = c.coll == Coll::AllGather || a2a ? c.count * nranks : c.count;
  const size_t inBytes = inElems * c.elemBytes, outBytes = outElems * c.elemBytes;
  // Out of place: input, then output, in one allocation. In place, as NCCL
  // places them: all-gather's input is the rank's block of its output,
  // reduce-scatter's output the rank's block of its input.
  size_t inAt = 0, outAt = 0, total = inBytes + outBytes;
  if (c.inPlace) {
    total = inBytes > outBytes ? inBytes : outBytes;
    if (c.coll == Coll::AllGather) inAt = rank * inBytes;
    if (c.coll == Coll::ReduceScatter) outAt = rank * outBytes;
  } else {
    outAt = inBytes;
  }
  std::vector<unsigned char> input(inBytes);
  fill(&input, c.type, rank);
  std::vector<unsigned char> host(total, 0xee);
  std::memcpy(host.data() + inAt, input.data(), inBytes);
  Arena mem(*g);
  const DevPtr d = mem.alloc(total + 16);
  mem.upload(d, host.data(), total);
  if (!mem.ok()) return mem.error();
  void* stream = g->streams[0];
  hocclResult_t rc =
      call(c, reinterpret_cast<void*>(d + inAt), reinterpret_cast<void*>(d + outAt), comm, stream);
  if (rc != hocclSuccess) return std::string("device call: ") + hocclGetErrorString(rc) + ": " + hocclGetLastError(comm);
  const std::string synced = g->check(g->cu.streamSynchronize(stream), "cuStreamSynchronize");
  if (!synced.empty()) return synced;
  hocclResult_t async = hocclInternalError;
  if (hocclCommGetAsyncError(comm, &async) != hocclSuccess || async != hocclSuccess)
    return std::string("async error: ") + hocclGetLastError(comm);
  std::vector<unsigned char> dev(total);
  mem.download(dev.data(), d, total);
  if (!mem.ok()) return mem.error();
  // The same call on host buffers laid out the same way.
  rc = call(c, host.data() + inAt, host.data() + outAt, comm, nullptr);
  if (rc != hocclSuccess) return std::string("host call: ") + hocclGetLastError(comm);
  for (size_t i = outAt; i < outAt + outBytes; ++i)
    if (dev[i] != host[i])
      return "differs from the host first at byte " + std::to_string(i - outAt) + " of " + std::to_string(outBytes) +
             " (device " + std::to_string(dev[i]) + ", host " + std::to_string(host[i]) + ")";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || !getenv("HOCCL_COMM_ID")) {
    fprintf(stderr, "usage: HOCCL_COMM_ID=host:port %s <rank> <nranks>\n", argv[0]);
    return 3;
  }
  const int rank = atoi(argv[1]), nranks = atoi(argv[2]);
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    fprintf(stderr, "gpu rank: rank %s of %s is not a rank\n", argv[1], argv[2]);
    return 3;
  }
  std::string why;
  Gpu* g = hoccl::gputest::openGpu(&why);
  if (!g) {
    fprintf(stderr, "rank %d: %s\n", rank, why.c_str());
    return 2;
  }
  hocclUniqueId id;
  hocclComm_t comm = nullptr;
  if (hocclGetUniqueId(&id) != hocclSuccess || hocclCommInitRank(&comm, nranks, id, rank) != hocclSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", rank, hocclGetLastError(nullptr));
    return 3;
  }
  const Case cases[] = {
      {"all-reduce f32 sum 4 Mi+5 (many channels)", Coll::AllReduce, hocclFloat32, 4, hocclSum, (size_t(1) << 22) + 5,
       false, 0},
      {"all-reduce f32 sum 64 (one node: oneshot)", Coll::AllReduce, hocclFloat32, 4, hocclSum, 64, false, 0},
      {"all-reduce i32 max 1000 in place", Coll::AllReduce, hocclInt32, 4, hocclMax, 1000, true, 0},
      {"reduce-scatter f32 sum 100003", Coll::ReduceScatter, hocclFloat32, 4, hocclSum, 100003, false, 0},
      {"reduce-scatter i32 sum 777 in place", Coll::ReduceScatter, hocclInt32, 4, hocclSum, 777, true, 0},
      {"all-gather f64 1 Mi", Coll::AllGather, hocclFloat64, 8, hocclSum, size_t(1) << 20, false, 0},
      {"all-gather u8 1001 in place", Coll::AllGather, hocclUint8, 1, hocclSum, 1001, true, 0},
      {"broadcast u8 1000 root 1", Coll::Broadcast, hocclUint8, 1, hocclSum, 1000, false, nranks > 1 ? 1 : 0},
      {"all-to-all f32 256 Ki per peer", Coll::AllToAll, hocclFloat32, 4, hocclSum, size_t(1) << 18, false, 0},
      {"all-to-all i32 1001 per peer in place", Coll::AllToAll, hocclInt32, 4, hocclSum, 1001, true, 0},
  };
  const char* ipc = getenv("HOCCL_DEVICE_IPC");
  const char* p2p = getenv("HOCCL_P2P_DISABLE");
  int failed = 0;
  for (const Case& c : cases) {
    const std::string err = runCase(g, c, comm, rank, nranks);
    // Fabric handles need an IMEX channel: a driver without one must say
    // so by name on every rank (and nothing else may go wrong).
    if (ipc && std::string(ipc) == "fabric" && &c == cases &&
        err.find("cannot share GPU memory by fabric handle") != std::string::npos) {
      printf("rank %d of %d (HOCCL_DEVICE_IPC=fabric): refused by name: %s\n", rank, nranks, err.c_str());
      hocclCommDestroy(comm);
      fflush(nullptr);
      return 0;
    }
    if (!err.empty()) {
      fprintf(stderr, "rank %d of %d: %s: %s\n", rank, nranks, c.name, err.c_str());
      ++failed;
      break;  // the ranks' calls no longer line up
    }
  }
  if (!failed)
    printf("rank %d of %d (HOCCL_DEVICE_IPC=%s, HOCCL_P2P_DISABLE=%s): %zu cases match the host\n", rank, nranks,
           ipc ? ipc : "", p2p ? p2p : "", sizeof cases / sizeof cases[0]);
  hocclCommDestroy(comm);
  fflush(nullptr);
  return failed ? 1 : 0;
}
