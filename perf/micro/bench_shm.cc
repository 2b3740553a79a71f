// Google Benchmark: single-stream bandwidth of the shared-memory transport,
// one sender thread and one receiver, through the real connection set-up
// (bootstrap over loopback, segments, doorbells).
//   bench_shm --benchmark_filter=shm
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "transport/shm/shm.h"

using namespace hoccl;

namespace {

struct Pair {
  std::unique_ptr<Bootstrap> boot[2];
  std::unique_ptr<ShmDomain> shm[2];
};

std::unique_ptr<Pair> connectPair(size_t slotBytes, int slots) {
  auto p = std::make_unique<Pair>();
  UniqueIdData id;
  id.magic = randomU64();
  SockAddr lo;
  if (!parseHostPort("127.0.0.1:0", &lo).ok() || !startRoot(lo, id.magic, 30, &id.root).ok()) return nullptr;
  std::thread th[2];
  std::atomic<bool> ok{true};
  for (int r = 0; r < 2; ++r) {
    th[r] = std::thread([&, r] {
      BootstrapOptions o;
      o.rank = r;
      o.nranks = 2;
      o.timeoutSec = 30;
      o.hostId = "bench";
      o.ifnameRule = "lo";
      ShmOptions so;
      so.commHash = id.magic;
      so.rank = r;
      so.slotBytes = slotBytes;
      so.slots = slots;
      if (!Bootstrap::join(id, o, &p->boot[r]).ok() ||
          !ShmDomain::create(*p->boot[r], so, {0, 1}, &p->shm[r]).ok() ||
          !p->shm[r]->connect(*p->boot[r], {{1 - r, 0, r == 0}}).ok())
        ok = false;
    });
  }
  for (auto& t : th) t.join();
  return ok ? std::move(p) : nullptr;
}

// Moves `bytes` from rank 0 to rank 1 in slot-sized messages; the receiver
// copies each slot out, as a recv step into the output buffer does.
void shmStream(benchmark::State& state) {
  const size_t slotBytes = static_cast<size_t>(state.range(0));
  const size_t total = 64 << 20;
  auto pair = connectPair(slotBytes, 8);
  if (!pair) {
    state.SkipWithError("connection set-up failed");
    return;
  }
  std::vector<char> src(total, 7), dst(total);
  SendConn* send = pair->shm[0]->sendConn(1, 0);
  RecvConn* recv = pair->shm[1]->recvConn(0, 0);
  for (auto _ : state) {
    std::thread sender([&] {
      for (size_t off = 0; off < total; off += slotBytes) {
        SlotHeader* h;
        void* payload;
        while (!send->tryAcquire(&h, &payload)) std::this_thread::yield();
        memcpy(payload, src.data() + off, slotBytes);
        h->bytes = static_cast<uint32_t>(slotBytes);
        send->post();
      }
    });
    for (size_t off = 0; off < total; off += slotBytes) {
      const SlotHeader* h;
      const void* payload;
      while (!recv->tryPeek(&h, &payload)) std::this_thread::yield();
      memcpy(dst.data() + off, payload, h->bytes);
      recv->release();
    }
    sender.join();
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(total));
}

BENCHMARK(shmStream)->Name("shm/stream/slot_bytes")->Arg(32 << 10)->Arg(128 << 10)->Arg(512 << 10)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
