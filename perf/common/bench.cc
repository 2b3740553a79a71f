// The sweep: for each type, op and root, for each size, time out-of-place
// and in-place calls, check results against closed-form values, print an
// nccl-tests row and a JSON line.
#include "perf/common/bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "perf/common/device_mem.h"
#include "src/check/values.h"

namespace bench {
namespace {

using namespace checkvals;

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }
bool rooted(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }

double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::ReduceScatter:
    case Coll::AllGather:
    case Coll::AllToAll: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

// Element counts for one size, as nccl-tests computes them.
struct Shape {
  size_t sendCount, recvCount, paramCount, bytes;
};

Shape shapeFor(Coll c, size_t size, size_t es, int n) {
  size_t count = size / es;
  Shape s{};
  size_t align = std::max<size_t>(1, 16 / es);
  switch (c) {
    case Coll::AllGather:
      s.sendCount = (count / n) / align * align;
      s.recvCount = s.sendCount * n;
      s.paramCount = s.sendCount;
      s.bytes = s.recvCount * es;
      break;
    case Coll::AllToAll:
      s.paramCount = (count / n) / align * align;
      s.sendCount = s.recvCount = s.paramCount * n;
      s.bytes = s.sendCount * es;
      break;
    case Coll::ReduceScatter:
      s.recvCount = (count / n) / align * align;
      s.sendCount = s.recvCount * n;
      s.paramCount = s.recvCount;
      s.bytes = s.sendCount * es;
      break;
    default:
      s.sendCount = s.recvCount = s.paramCount = count;
      s.bytes = count * es;
  }
  return s;
}

// The -T watchdog: one per process, fed by every row.
std::atomic<double> lastBeat{0};
std::once_flag watchdogOnce;

void startWatchdog(int timeoutSec) {
  if (timeoutSec <= 0) return;
  std::call_once(watchdogOnce, [timeoutSec] {
    lastBeat = nowSec();
    std::thread([timeoutSec] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (nowSec() - lastBeat.load() > timeoutSec) {
          fprintf(stderr, "# test timed out after %d s (-T); exiting\n", timeoutSec);
          fflush(stdout);
          _exit(124);
        }
      }
    }).detach();
  });
}

class Runner {
 public:
  Runner(const std::vector<Backend*>& bs, const Options& o, Coll c)
      : bs_(bs), b_(*bs[0]), o_(o), c_(c), n_(b_.nranks()), rank_(b_.rank()) {
    for (size_t j = 0; j < bs_.size(); ++j) algoList_ += (j ? "," : "") + bs_[j]->algorithm();
  }

  long long run(int threadsPerProcess) {
    print_ = rank_ == 0 || o_.verbose;
    startWatchdog(o_.timeoutSec);
    if (o_.deviceMemory) openDevice();
    if (rank_ == 0 && !o_.jsonPath.empty()) {
      json_ = fopen(o_.jsonPath.c_str(), "w");
      if (!json_) fprintf(stderr, "# cannot write %s\n", o_.jsonPath.c_str());
    }
    preamble(threadsPerProcess);
    if (!error_.empty()) return -1;
    long long wrongTotal = 0;
    for (int cycle = 0; o_.cycles == 0 || cycle < o_.cycles; ++cycle) {
      for (hocclDataType_t t : o_.types) {
        std::vector<hocclRedOp_t> ops = reduces(c_) ? o_.ops : std::vector<hocclRedOp_t>{hocclSum};
        for (hocclRedOp_t op : ops) {
          std::vector<int> roots;
          if (!rooted(c_)) roots = {-1};
          else if (o_.root < 0) for (int r = 0; r < n_; ++r) roots.push_back(r);
          else roots = {o_.root};
          if (!b_.supports(c_, t, op)) {
            if (print_)
              printf("# %s does not support %s%s%s; skipped\n", b_.library(), typeName(t), reduces(c_) ? " " : "",
                     reduces(c_) ? opName(op) : "");
            continue;
          }
          for (int root : roots) {
            long long w = sweep(t, op, root);
            if (w < 0) return finish(-1);
            wrongTotal += w;
          }
        }
      }
    }
    return finish(wrongTotal);
  }

 private:
  void preamble(int threadsPerProcess) {
    if (rooted(c_) && o_.root >= n_) error_ = "root " + std::to_string(o_.root) + " is out of range for " + std::to_string(n_) + " ranks";
    // What the GPU copies alone, before any rank queues work on it: the
    // ceiling to read the busbw column against.
    std::string copyLine;
    if (dev_ && rank_ == 0) {
      constexpr size_t kCopyBytes = size_t(256) << 20;
      double gbs = 0;
      const std::string e = dev_->copyRate(kCopyBytes, 10, &gbs);
      char line[200];
      if (e.empty())
        snprintf(line, sizeof line, "# Device copy rate: cuMemcpyDtoD of 256 MiB on GPU %d alone, %.1f GB/s",
                 dev_->ordinal(), gbs);
      else
        snprintf(line, sizeof line, "# Device copy rate: not measured (%s)", e.c_str());
      copyLine = line;
    }
    std::vector<std::string> lines =
        b_.allGatherLine(dev_ ? deviceLine(rank_, "GPU " + std::to_string(dev_->ordinal()) + " " + dev_->name())
                              : b_.deviceDescription());
    if (o_.deviceMemory) {  // every rank stops if one has no GPU: none may wait for it
      const bool failed = b_.allReduceDouble(deviceError_.empty() ? 0 : 1, hocclMax) > 0;
      if (failed) error_ = deviceError_.empty() ? "another rank could not use its GPU (--buffers device)" : deviceError_;
    }
    if (!print_) return;
    printf("# %s-tests (nccl-tests 2.19.6 format) %s library=%s algo=%s hoccl-headers=%d\n", b_.library(),
           b_.library(), b_.library(), algoList_.c_str(), HOCCL_VERSION_CODE);
    if (sideBySide())
      printf("# Side by side: %zu communicators (%s), each size timed in %d interleaved blocks\n", bs_.size(),
             algoList_.c_str(), blocks());
    printf("# Collective test starting: %s\n", collTestName(c_));
    char step[64];
    if (o_.stepFactor > 1) snprintf(step, sizeof step, "%g(factor)", o_.stepFactor);
    else snprintf(step, sizeof step, "%zu(bytes)", o_.stepBytes);
    printf("# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg iters: %d "
           "validation: %d graph: 0 unalign: 0\n#\n# Using devices\n",
           threadsPerProcess, o_.minBytes, o_.maxBytes, step, o_.warmup, o_.iters, o_.aggIters, o_.check);
    for (const std::string& l : lines) printf("%s\n", l.c_str());
    if (!copyLine.empty()) printf("%s\n", copyLine.c_str());
    if (!error_.empty()) {
      fprintf(stderr, "# %s\n", error_.c_str());
      return;
    }
    printf("#\n");
    const char* algoCol = sideBySide() ? "  algo" : "";
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", algoCol);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }

  // --buffers device: this rank's GPU, and every backend's calls on its stream.
  void openDevice() {
    for (Backend* b : bs_)
      if (!b->supportsDeviceMemory())
        deviceError_ = std::string(b->library()) + " runs on host memory only (--buffers device is hoccl's)";
    if (deviceError_.empty()) dev_ = DeviceMemory::open(rank_, &deviceError_);
    if (!dev_) {
      deviceError_ = "--buffers device: " + deviceError_;
      return;
    }
    for (Backend* b : bs_) b->setStream(dev_->stream());
  }

  // The device buffers mirror sendBuf_ and recvBuf_, offset for offset.
  bool deviceBuffers(size_t sendBytes, size_t recvBytes) {
    if (!dev_) return true;
    std::string e;
    if (sendBytes > dsendCap_ && (e = dev_->alloc(sendBytes, &dsend_)).empty()) dsendCap_ = sendBytes;
    if (e.empty() && recvBytes > drecvCap_ && (e = dev_->alloc(recvBytes, &drecv_)).empty()) drecvCap_ = recvBytes;
    return e.empty() || fail(e);
  }
  void* onDevice(void* host) {
    char* h = static_cast<char*>(host);
    char* sb = sendBuf_.data();
    char* rb = recvBuf_.data();
    if (h >= sb && h < sb + sendBuf_.size()) return static_cast<char*>(dsend_) + (h - sb);
    return static_cast<char*>(drecv_) + (h - rb);
  }
  // The host address that mirrors a device one.
  void* onHost(void* device) {
    char* d = static_cast<char*>(device);
    char* ds = static_cast<char*>(dsend_);
    if (d >= ds && d < ds + dsendCap_) return sendBuf_.data() + (d - ds);
    return recvBuf_.data() + (d - static_cast<char*>(drecv_));
  }
  // Copies the host buffers' first bytes to the device, or back.
  bool copyBuffers(const Shape& s, size_t es, bool toDevice) {
    if (!dev_) return true;
    const size_t sendBytes = s.sendCount * es, recvBytes = std::max(s.recvCount, s.sendCount) * es;
    std::string e = toDevice ? dev_->toDevice(dsend_, sendBuf_.data(), sendBytes)
                             : dev_->toHost(sendBuf_.data(), dsend_, sendBytes);
    if (e.empty())
      e = toDevice ? dev_->toDevice(drecv_, recvBuf_.data(), recvBytes) : dev_->toHost(recvBuf_.data(), drecv_, recvBytes);
    return e.empty() || fail(e);
  }
  // Waits for the stream, asking the backends for asynchronous errors now
  // and then (every 10 ms after the first), as nccl-tests does: that is
  // how a failure elsewhere reaches a rank whose launches wait for a peer.
  bool syncDevice() {
    if (!dev_) return true;
    const auto start = std::chrono::steady_clock::now();
    auto lastAsk = start;
    for (;;) {
      bool done = false;
      const std::string e = dev_->query(&done);
      if (!e.empty()) return fail(e);
      if (done) return true;
      const auto now = std::chrono::steady_clock::now();
      if (now - lastAsk > std::chrono::milliseconds(10)) {
        lastAsk = now;
        for (Backend* b : bs_) {
          const std::string a = b->asyncError();
          if (!a.empty()) return fail(a);
        }
      }
      if (now - start > std::chrono::microseconds(200)) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  long long finish(long long wrong) {
    if (print_) {
      printf("# %-20s : %lld %s\n", "Out of bounds values", std::max(0LL, wrong), wrong == 0 ? "OK" : "FAILED");
      double avg = bwCount_ ? bwSum_ / bwCount_ : 0;
      const char* minBw = getenv("NCCL_TESTS_MIN_BW");
      const char* verdict = "";
      if (minBw) verdict = avg < 0.9 * atof(minBw) ? "FAILED" : "OK";
      printf("# %-20s : %g %s\n#\n", "Avg bus bandwidth", avg, verdict);
      printf("# Collective test concluded: %s\n", collTestName(c_));
      fflush(stdout);
    }
    if (json_) fclose(json_);
    return wrong;
  }

  struct Result {
    double timeUs = 0, algbw = 0, busbw = 0;
    long long wrong = -1;  // -1: not checked
    bool skipped = false;  // not run (Backend::timesInPlace)
    std::vector<double> blockUs;  // side by side: time per call in each block (across ranks)
    double medianUs = 0;          // side by side: median of blockUs
    // Side by side, as it happened: each block's position in the run order of
    // all blocks of this size and placement (0, 1, ...) and when it started
    // (this rank's clock, us after the first timed block started), so that a
    // test can check the blocks really alternated.
    std::vector<int> blockOrder;
    std::vector<double> blockStartUs;
  };

  static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
  }

  // A rank's timing combined across ranks as -a asks (0: rank 0's own).
  double acrossRanks(double secs) {
    if (o_.average == 1) return b_.allReduceDouble(secs, hocclSum) / n_;
    if (o_.average == 2) return b_.allReduceDouble(secs, hocclMin);
    if (o_.average == 3) return b_.allReduceDouble(secs, hocclMax);
    return secs;
  }

  // Side by side: median over blocks of a's time per call over b's in the
  // same block (the blocks ran next to each other).
  static double pairedRatio(const Result& a, const Result& b) {
    std::vector<double> r;
    for (size_t k = 0; k < a.blockUs.size() && k < b.blockUs.size(); ++k)
      if (b.blockUs[k] > 0) r.push_back(a.blockUs[k] / b.blockUs[k]);
    return median(r);
  }

  // Puts rank's data for a check in place (on the GPU too with --buffers
  // device); returns the pointers to use (device ones then).
  bool prepare(hocclDataType_t t, hocclRedOp_t op, int root, const Shape& s, bool inPlace, void** send, void** recv) {
    size_t es = typeSize(t);
    char* sb = sendBuf_.data();
    char* rb = recvBuf_.data();
    switch (c_) {
      case Coll::AllReduce: case Coll::Reduce:
        fillReduceInput(inPlace ? rb : sb, t, op, rank_, 0, s.sendCount);
        *send = inPlace ? rb : sb;
        *recv = rb;
        break;
      case Coll::ReduceScatter:
        fillReduceInput(sb, t, op, rank_, 0, s.sendCount);
        *send = sb;
        *recv = inPlace ? sb + rank_ * s.recvCount * es : rb;
        break;
      case Coll::AllGather: {
        char* mine = inPlace ? rb + rank_ * s.sendCount * es : sb;
        for (size_t i = 0; i < s.sendCount; ++i) store(mine, t, i, gatherValue(t, rank_, i));
        *send = mine;
        *recv = rb;
        break;
      }
      case Coll::Broadcast:
      case Coll::AllToAll:
      case Coll::SendRecv: {
        char* mine = inPlace ? rb : sb;
        for (size_t i = 0; i < s.sendCount; ++i) store(mine, t, i, gatherValue(t, rank_, i));
        *send = mine;
        *recv = rb;
        break;
      }
    }
    (void)root;
    if (!dev_) return true;
    if (!copyBuffers(s, es, true)) return false;
    *send = onDevice(*send);
    *recv = onDevice(*recv);
    return true;
  }

  long long countWrong(hocclDataType_t t, hocclRedOp_t op, int root, const Shape& s, const void* recv) {
    switch (c_) {
      case Coll::AllReduce: return static_cast<long long>(countReduceErrors(recv, t, op, n_, 0, s.recvCount));
      case Coll::ReduceScatter:
        return static_cast<long long>(countReduceErrors(recv, t, op, n_, rank_ * s.recvCount, s.recvCount));
      case Coll::Reduce:
        return rank_ == root ? static_cast<long long>(countReduceErrors(recv, t, op, n_, 0, s.recvCount)) : 0;
      case Coll::AllGather: {
        long long w = 0;
        for (int r = 0; r < n_; ++r)
          for (size_t i = 0; i < s.sendCount; ++i) w += load(recv, t, r * s.sendCount + i) != gatherValue(t, r, i);
        return w;
      }
      case Coll::Broadcast: {
        long long w = 0;
        for (size_t i = 0; i < s.recvCount; ++i) w += load(recv, t, i) != gatherValue(t, root, i);
        return w;
      }
      case Coll::AllToAll: {
        // Block r of this rank's output is block `rank` of rank r's input.
        long long w = 0;
        const size_t pc = s.paramCount;
        for (int r = 0; r < n_; ++r)
          for (size_t i = 0; i < pc; ++i) w += load(recv, t, r * pc + i) != gatherValue(t, r, rank_ * pc + i);
        return w;
      }
      case Coll::SendRecv: {
        long long w = 0;
        const int from = (rank_ + n_ - 1) % n_;
        for (size_t i = 0; i < s.recvCount; ++i) w += load(recv, t, i) != gatherValue(t, from, i);
        return w;
      }
    }
    return 0;
  }

  bool sideBySide() const { return bs_.size() > 1; }
  // Timed blocks per size: one alone; side by side --blocks or min(iters, 10).
  int blocks() const {
    if (!sideBySide()) return 1;
    int b = o_.blocks > 0 ? o_.blocks : std::min(o_.iters, 10);
    return std::max(1, std::min(b, std::max(1, o_.iters)));
  }

  // Calls of `total` that block k of `nblocks` runs.
  static int blockCalls(int total, int nblocks, int k) { return total / nblocks + (k < total % nblocks ? 1 : 0); }

  // Runs `total` calls of every backend in `nblocks` blocks: block k calls
  // run(k, j, n) for each backend j in turn, in reverse order on odd k (so
  // backends next to each other in time alternate). Stops at a false.
  template <typename Fn>
  bool interleave(int total, int nblocks, Fn run) {
    const size_t nb = bs_.size();
    for (int k = 0; k < nblocks; ++k)
      for (size_t i = 0; i < nb; ++i)
        if (!run(k, k % 2 ? nb - 1 - i : i, blockCalls(total, nblocks, k))) return false;
    return true;
  }

  // Times every backend on one size (out of place or in place) and checks
  // each; out[j] is backend j's result.
  bool measure(hocclDataType_t t, hocclRedOp_t op, int root, const Shape& s, bool inPlace, std::vector<Result>* out) {
    const size_t nb = bs_.size();
    out->assign(nb, Result());
    void *send = nullptr, *recv = nullptr;
    if (!prepare(t, op, root, s, inPlace, &send, &recv)) return false;
    const int nblocks = blocks();
    // Warm-up in the same interleaved blocks, so that no communicator
    // starts its timed blocks after sitting idle through the others' warm-up.
    const int warmBlocks = std::max(1, std::min(nblocks, o_.warmup));
    bool ok = interleave(o_.warmup, warmBlocks, [&](int, size_t j, int n) {
      Backend& be = *bs_[j];
      if (sideBySide()) be.barrier();  // as before a timed block: a first 4-byte call must not land in the timing
      for (int it = 0; it < n; ++it)
        if (!call(be, t, op, root, s, send, recv)) return false;
      return syncDevice();
    });
    if (!ok) return false;
    std::vector<std::vector<double>> blockSecs(nb, std::vector<double>(nblocks, 0));
    std::vector<std::vector<double>> blockStart(nb, std::vector<double>(nblocks, -1));
    std::vector<std::vector<int>> blockOrder(nb, std::vector<int>(nblocks, -1));
    int ran = 0;
    double firstStart = -1;
    ok = interleave(o_.iters, nblocks, [&](int k, size_t j, int n) {
      Backend& be = *bs_[j];
      be.barrier();
      double t0 = nowSec();
      if (firstStart < 0) firstStart = t0;
      blockOrder[j][k] = ran++;
      blockStart[j][k] = (t0 - firstStart) * 1e6;
      // As nccl-tests: a group only around aggregated calls (-m > 1); a
      // single call per iteration is made on its own.
      const bool grouped = o_.aggIters > 1;
      for (int it = 0; it < n; ++it) {
        if (grouped) be.aggregateBegin();
        for (int a = 0; a < o_.aggIters; ++a)
          if (!call(be, t, op, root, s, send, recv)) return false;
        if (!grouped) continue;
        std::string err = be.aggregateEnd();
        if (!err.empty()) return fail(err);
      }
      if (!syncDevice()) return false;  // a call on device buffers is done when its stream is
      blockSecs[j][k] = nowSec() - t0;
      return true;
    });
    if (!ok) return false;
    const double bytes = static_cast<double>(c_ == Coll::AllGather ? s.recvCount : s.sendCount) * typeSize(t);
    for (size_t j = 0; j < nb; ++j) {
      Result& r = (*out)[j];
      double spent = 0;
      for (double b : blockSecs[j]) spent += b;
      double secs = acrossRanks(o_.iters > 0 ? spent / (o_.iters * o_.aggIters) : 0);
      r.timeUs = secs * 1e6;
      if (sideBySide()) {
        for (int k = 0; k < nblocks; ++k)
          if (int n = blockCalls(o_.iters, nblocks, k)) {
            r.blockUs.push_back(acrossRanks(blockSecs[j][k] / (n * o_.aggIters)) * 1e6);
            r.blockOrder.push_back(blockOrder[j][k]);
            r.blockStartUs.push_back(blockStart[j][k]);
          }
        r.medianUs = median(r.blockUs);
      }
      r.algbw = secs > 0 ? bytes / secs / 1e9 : 0;
      r.busbw = r.algbw * busFactor(c_, n_);
      if (o_.check > 0) {
        long long wrong = 0;
        for (int k = 0; k < o_.check; ++k) {
          if (!prepare(t, op, root, s, inPlace, &send, &recv)) return false;
          if (!call(*bs_[j], t, op, root, s, send, recv)) return false;
          void* hostRecv = recv;
          if (dev_) {
            if (!syncDevice() || !copyBuffers(s, typeSize(t), false)) return false;
            hostRecv = onHost(recv);
          }
          wrong += countWrong(t, op, root, s, hostRecv);
        }
        r.wrong = static_cast<long long>(b_.allReduceDouble(static_cast<double>(wrong), hocclSum));
      }
    }
    return true;
  }

  bool call(Backend& be, hocclDataType_t t, hocclRedOp_t op, int root, const Shape& s, const void* send, void* recv) {
    std::string err = be.run(c_, send, recv, s.paramCount, t, op, root < 0 ? 0 : root);
    return err.empty() || fail(err);
  }

  bool fail(const std::string& err) {
    fprintf(stderr, "# rank %d: %s %s failed: %s\n", rank_, b_.library(), collTestName(c_), err.c_str());
    error_ = err;
    return false;
  }

  long long sweep(hocclDataType_t t, hocclRedOp_t op, int root) {
    size_t es = typeSize(t);
    Shape maxShape = shapeFor(c_, o_.maxBytes, es, n_);
    sendBuf_.assign(maxShape.sendCount * es + 64, 0);
    recvBuf_.assign(std::max(maxShape.recvCount, maxShape.sendCount) * es + 64, 0);
    if (!deviceBuffers(sendBuf_.size(), recvBuf_.size())) return -1;
    long long wrongTotal = 0;
    for (size_t size = o_.minBytes; size <= o_.maxBytes;) {
      Shape s = shapeFor(c_, size, es, n_);
      std::vector<Result> r[2];
      for (int ip = 0; ip < 2; ++ip) {
        if (ip == 1 && !b_.timesInPlace(c_)) {
          r[ip].assign(bs_.size(), Result());
          for (Result& x : r[ip]) x.skipped = true;
          continue;
        }
        if (!measure(t, op, root, s, ip == 1, &r[ip])) return -1;
      }
      lastBeat = nowSec();
      for (size_t j = 0; j < bs_.size(); ++j) {
        const Result pair[2] = {r[0][j], r[1][j]};
        const double toFirst[2] = {pairedRatio(r[0][j], r[0][0]), pairedRatio(r[1][j], r[1][0])};
        row(*bs_[j], t, op, root, s, pair, toFirst);
        for (const Result& x : pair) {
          if (x.skipped) continue;
          if (x.wrong > 0) wrongTotal += x.wrong;
          bwSum_ += x.busbw;
          ++bwCount_;
        }
      }
      if (sideBySide() && print_) {
        printf("# side by side, time relative to %s, median of %zu paired blocks (out of place, in place):",
               bs_[0]->algorithm().c_str(), r[0][0].blockUs.size());
        for (size_t j = 1; j < bs_.size(); ++j)
          printf(" %s %.3f %.3f", bs_[j]->algorithm().c_str(), pairedRatio(r[0][j], r[0][0]),
                 pairedRatio(r[1][j], r[1][0]));
        printf("\n");
        fflush(stdout);
      }
      size_t next = o_.stepFactor > 1 ? static_cast<size_t>(size * o_.stepFactor) : size + o_.stepBytes;
      if (next <= size) break;
      size = next;
    }
    return wrongTotal;
  }

  // `ratioToFirst`: side by side, the paired-block ratio to the first backend.
  void row(Backend& be, hocclDataType_t t, hocclRedOp_t op, int root, const Shape& s, const Result* r,
           const double* ratioToFirst) {
    const char* opStr = reduces(c_) ? opName(op) : "none";
    if (print_) {
      printf("%12zu  %12zu  %8s  %6s  %6d", s.bytes, s.paramCount, typeName(t), opStr, root);
      for (int i = 0; i < 2; ++i) {
        if (r[i].skipped) {
          printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
          continue;
        }
        printf("  %7s  %6s  %6s", fitNumber(r[i].timeUs, 7).c_str(), fitNumber(r[i].algbw, 6).c_str(),
               fitNumber(r[i].busbw, 6).c_str());
        if (r[i].wrong < 0) printf("  %6s", "N/A");
        else printf("  %6g", static_cast<double>(r[i].wrong));
      }
      if (sideBySide()) printf("  %s", be.algorithm().c_str());
      printf("\n");
      fflush(stdout);
    }
    if (json_) {
      fprintf(json_,
              "{\"library\":\"%s\",\"algo\":\"%s\",\"collective\":\"%s\",\"nranks\":%d,\"size\":%zu,\"count\":%zu,"
              "\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d",
              be.library(), be.algorithm().c_str(), collShortName(c_), n_, s.bytes, s.paramCount, typeName(t), opStr, root);
      if (sideBySide()) fprintf(json_, ",\"side_by_side\":\"%s\",\"blocks\":%d", algoList_.c_str(), blocks());
      const char* names[2] = {"oop", "ip"};
      for (int i = 0; i < 2; ++i) {
        if (r[i].skipped) {
          fprintf(json_, ",\"%s\":null", names[i]);
          continue;
        }
        fprintf(json_, ",\"%s\":{\"time_us\":%.3f,\"algbw\":%.6f,\"busbw\":%.6f,\"wrong\":", names[i], r[i].timeUs,
                r[i].algbw, r[i].busbw);
        if (r[i].wrong < 0) fprintf(json_, "null");
        else fprintf(json_, "%lld", r[i].wrong);
        if (sideBySide()) {
          fprintf(json_, ",\"median_us\":%.3f,\"ratio_to_first\":%.4f,\"block_us\":[", r[i].medianUs, ratioToFirst[i]);
          for (size_t k = 0; k < r[i].blockUs.size(); ++k) fprintf(json_, "%s%.1f", k ? "," : "", r[i].blockUs[k]);
          fprintf(json_, "],\"block_order\":[");
          for (size_t k = 0; k < r[i].blockOrder.size(); ++k) fprintf(json_, "%s%d", k ? "," : "", r[i].blockOrder[k]);
          fprintf(json_, "],\"block_start_us\":[");
          for (size_t k = 0; k < r[i].blockStartUs.size(); ++k)
            fprintf(json_, "%s%.1f", k ? "," : "", r[i].blockStartUs[k]);
          fprintf(json_, "]");
        }
        fprintf(json_, "}");
      }
      fprintf(json_, "}\n");
      fflush(json_);
    }
  }

  std::vector<Backend*> bs_;
  Backend& b_;  // the first: prints the preamble, reduces timings and checks across ranks
  std::string algoList_;
  const Options& o_;
  Coll c_;
  int n_, rank_;
  bool print_ = false;
  FILE* json_ = nullptr;
  std::string error_;
  std::vector<char> sendBuf_, recvBuf_;
  std::unique_ptr<DeviceMemory> dev_;  // --buffers device
  std::string deviceError_;
  void *dsend_ = nullptr, *drecv_ = nullptr;
  size_t dsendCap_ = 0, drecvCap_ = 0;
  double bwSum_ = 0;
  long long bwCount_ = 0;
};

}  // namespace

std::string deviceLine(int rank, const std::string& what) {
  // The node as the library sees it: HOCCL_HOSTID when set (emulated nodes).
  char host[64] = {0};
  const char* id = getenv("HOCCL_HOSTID");
  if (id && *id) snprintf(host, sizeof host, "%s", id);
  else gethostname(host, sizeof host - 1);
  char buf[kLineBytes];
  snprintf(buf, sizeof buf, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%04x:%02x:%02x] %s", rank,
           static_cast<int>(getpid()), host, -1, 0, 0, 0, what.c_str());
  return buf;
}

std::string fitNumber(double v, int width) {
  char buf[64];
  for (int dec = 2; dec >= 0; --dec) {
    snprintf(buf, sizeof buf, "%.*f", dec, v);
    if (static_cast<int>(strlen(buf)) <= width) return buf;
  }
  for (int dec = std::max(0, width - 6); dec >= 0; --dec) {
    snprintf(buf, sizeof buf, "%.*e", dec, v);
    if (static_cast<int>(strlen(buf)) <= width) return buf;
  }
  return buf;
}

long long runBenchmark(Backend& b, const Options& opt, Coll coll, int threadsPerProcess) {
  return runBenchmark(std::vector<Backend*>{&b}, opt, coll, threadsPerProcess);
}

long long runBenchmark(const std::vector<Backend*>& backends, const Options& opt, Coll coll, int threadsPerProcess) {
  if (backends.empty()) return -1;
  Runner r(backends, opt, coll);
  return r.run(threadsPerProcess);
}

}  // namespace bench
