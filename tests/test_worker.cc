// One rank of a multi-process test, using only the public API. Rank 0
// writes the unique id to a file; the others wait for it.
//   hoccl_test_worker <scenario> <rank> <nranks> <idfile>
// Scenarios: full, mismatch, die, config, loop, late, idle-watch, idle-die,
// idle-leave, flight-hang, flight-mismatch. Exit 0 when the rank saw what
// the scenario expects; otherwise print why and exit non-zero.
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/check/values.h"

using namespace checkvals;

namespace {

bool exchangeId(int rank, const std::string& path, hocclUniqueId* id) {
  if (rank == 0) {
    if (hocclGetUniqueId(id) != hocclSuccess) return false;
    std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1) return false;
    fclose(f);
    return rename(tmp.c_str(), path.c_str()) == 0;
  }
  for (int i = 0; i < 3000; ++i) {
    FILE* f = fopen(path.c_str(), "rb");
    if (f) {
      bool ok = fread(id, sizeof *id, 1, f) == 1;
      fclose(f);
      if (ok) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int fail(int rank, const std::string& what) {
  fprintf(stderr, "worker rank %d: %s\n", rank, what.c_str());
  return 1;
}

// Elements of the "full" scenario's large all-reduces: 10000019 of every
// type and 24M floats, or HOCCL_TEST_LARGE_COUNT of each. tools/sanitize.sh
// sets a smaller count (still many slices and several laps of every
// connection's slot ring): instrumented, the large calls took three quarters
// of the scenario's time.
uint64_t largeCount(uint64_t fallback) {
  const char* v = getenv("HOCCL_TEST_LARGE_COUNT");
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long c = strtoull(v, &end, 10);
  if (*end || c == 0) {
    fprintf(stderr, "worker: HOCCL_TEST_LARGE_COUNT=%s is not a positive element count\n", v);
    exit(2);
  }
  return c;
}

int runFull(hocclComm_t comm, int rank, int n) {
  const hocclDataType_t types[] = {hocclInt8, hocclUint8, hocclInt32, hocclUint32, hocclInt64,
                                   hocclUint64, hocclFloat16, hocclFloat32, hocclFloat64, hocclBfloat16,
                                   hocclFloat8e4m3, hocclFloat8e5m2};
  const hocclRedOp_t ops[] = {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg};
  for (uint64_t count : {0ull, 1ull, 1009ull, 65537ull})
    for (hocclDataType_t t : types)
      for (hocclRedOp_t op : ops)
        for (bool inPlace : {false, true}) {
          size_t es = typeSize(t);
          std::vector<char> in(count * n * es + 1), out(count * n * es + 1);
          std::string err;
          fillReduceInput(in.data(), t, op, rank, 0, count);
          void* recv = inPlace ? in.data() : out.data();
          if (hocclAllReduce(in.data(), recv, count, t, op, comm, nullptr) != hocclSuccess)
            return fail(rank, std::string("AllReduce: ") + hocclGetLastError(comm));
          if (countReduceErrors(recv, t, op, n, 0, count, &err))
            return fail(rank, std::string("AllReduce ") + typeName(t) + " " + opName(op) + ": " + err);
          fillReduceInput(in.data(), t, op, rank, 0, count * n);
          recv = inPlace ? in.data() + rank * count * es : out.data();
          if (hocclReduceScatter(in.data(), recv, count, t, op, comm, nullptr) != hocclSuccess)
            return fail(rank, std::string("ReduceScatter: ") + hocclGetLastError(comm));
          if (countReduceErrors(recv, t, op, n, rank * count, count, &err))
            return fail(rank, std::string("ReduceScatter ") + typeName(t) + " " + opName(op) + ": " + err);
          if (op != hocclSum) continue;
          char* send = inPlace ? out.data() + rank * count * es : in.data();
          for (uint64_t i = 0; i < count; ++i) store(send, t, i, gatherValue(t, rank, i));
          if (hocclAllGather(send, out.data(), count, t, comm, nullptr) != hocclSuccess)
            return fail(rank, std::string("AllGather: ") + hocclGetLastError(comm));
          for (int r = 0; r < n; ++r)
            for (uint64_t i = 0; i < count; ++i)
              if (load(out.data(), t, r * count + i) != gatherValue(t, r, i))
                return fail(rank, std::string("AllGather ") + typeName(t) + " wrong at " + std::to_string(r * count + i));
        }
  // Tens of millions of elements of every type, in place, summed.
  for (hocclDataType_t t : types) {
    const uint64_t count = largeCount(10000019);
    std::vector<char> buf(count * typeSize(t));
    std::string err;
    fillReduceInput(buf.data(), t, hocclSum, rank, 0, count);
    if (hocclAllReduce(buf.data(), buf.data(), count, t, hocclSum, comm, nullptr) != hocclSuccess)
      return fail(rank, std::string("large AllReduce: ") + hocclGetLastError(comm));
    if (countReduceErrors(buf.data(), t, hocclSum, n, 0, count, &err))
      return fail(rank, std::string("large AllReduce ") + typeName(t) + ": " + err);
  }
  // And 24M floats out of place.
  const uint64_t big = largeCount(24000000);
  std::vector<float> src(big), buf(big);
  for (uint64_t i = 0; i < big; ++i) src[i] = static_cast<float>((rank + i) % 3);
  if (hocclAllReduce(src.data(), buf.data(), big, hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
    return fail(rank, std::string("large AllReduce: ") + hocclGetLastError(comm));
  for (uint64_t i = 0; i < big; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<float>((r + i) % 3);
    if (buf[i] != want) return fail(rank, "large AllReduce wrong at " + std::to_string(i));
  }
  return 0;
}

bool contains(const char* s, const char* what) { return strstr(s, what) != nullptr; }

double epochSec() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// All-reduces 1M floats until a call fails or `seconds` pass; a peer is
// killed meanwhile (results/scripts/soak-kill.sh, the cluster tests). Prints one line
// "DETECTED <epoch s> <code> <message>" for the caller to judge, and exits
// 0 if a call failed, 1 if none did. HOCCL_TEST_SELF_KILL=<rank>:<seconds>
// makes that rank SIGKILL itself after that long (as kill -9 from outside),
// and the others then exit 0 only if their error is hocclRemoteError naming it.
int runLoop(hocclComm_t comm, int rank, double seconds) {
  int killRank = -1;
  double killAfter = 0;
  if (const char* k = getenv("HOCCL_TEST_SELF_KILL")) sscanf(k, "%d:%lf", &killRank, &killAfter);
  std::vector<float> buf(1 << 20, 1.0f);
  double start = epochSec();
  fprintf(stderr, "LOOPING rank %d pid %d\n", rank, static_cast<int>(getpid()));
  for (uint64_t i = 0;; ++i) {
    if (rank == killRank && epochSec() - start > killAfter) {
      fprintf(stderr, "KILLING rank %d at %.6f\n", rank, epochSec());
      raise(SIGKILL);
    }
    hocclResult_t rc = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr);
    if (rc != hocclSuccess) {
      const char* msg = hocclGetLastError(comm);
      fprintf(stderr, "DETECTED %.6f %d %s\n", epochSec(), static_cast<int>(rc), msg);
      if (killRank < 0) return 0;  // the caller judges the report
      std::string culprit = "rank " + std::to_string(killRank);
      const char* at = strstr(msg, culprit.c_str());
      bool named = at && !isdigit(static_cast<unsigned char>(at[culprit.size()]));
      return rc == hocclRemoteError && named ? 0 : fail(rank, "the report does not name killed " + culprit);
    }
    if (i % 64 == 0) std::fill(buf.begin(), buf.end(), 1.0f);  // keep the values finite
    if (epochSec() - start > seconds) return fail(rank, "no call failed: nobody was killed?");
  }
}

// Two all-reduces; between them the last rank, alive, sleeps
// HOCCL_TEST_LATE_SEC (a rank slow to reach a call, longer than the
// heartbeat timeout): every rank must complete both.
int runLate(hocclComm_t comm, int rank, int n) {
  const char* v = getenv("HOCCL_TEST_LATE_SEC");
  const double late = v ? atof(v) : 3;
  std::vector<float> buf(1 << 16, 1.0f);
  for (int call = 0; call < 2; ++call) {
    if (call == 1 && rank == n - 1) std::this_thread::sleep_for(std::chrono::duration<double>(late));
    double t0 = epochSec();
    if (hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
      return fail(rank, std::string("AllReduce: ") + hocclGetLastError(comm));
    fprintf(stderr, "CALL %d took %.2f s\n", call, epochSec() - t0);
  }
  return 0;
}

// One all-reduce, then only hocclCommGetAsyncError every 10 ms for up to
// `seconds` (a peer is frozen meanwhile): prints "DETECTED <epoch s> <code>
// <message>" once it reports an error and exits 0, or exits 1 if none did.
int runIdleWatch(hocclComm_t comm, int rank, double seconds) {
  std::vector<float> buf(1024, 1.0f);
  if (hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
    return fail(rank, std::string("AllReduce: ") + hocclGetLastError(comm));
  fprintf(stderr, "LOOPING rank %d pid %d\n", rank, static_cast<int>(getpid()));
  for (double start = epochSec(); epochSec() - start < seconds;) {
    hocclResult_t async = hocclSuccess;
    if (hocclCommGetAsyncError(comm, &async) != hocclSuccess) return fail(rank, "hocclCommGetAsyncError failed");
    if (async != hocclSuccess) {
      fprintf(stderr, "DETECTED %.6f %d %s\n", epochSec(), static_cast<int>(async), hocclGetLastError(comm));
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fail(rank, "no asynchronous error");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s full|mismatch|die|config|loop|late|idle-watch|idle-die|idle-leave|flight-hang|"
                    "flight-mismatch rank nranks idfile\n"
                    "  rank and nranks may be 'env': RANK and WORLD_SIZE (launchers)\n", argv[0]);
    return 2;
  }
  std::string scenario = argv[1];
  auto number = [](const char* arg, const char* var) {
    const char* v = strcmp(arg, "env") == 0 ? getenv(var) : arg;
    return v ? atoi(v) : -1;
  };
  int rank = number(argv[2], "RANK"), n = number(argv[3], "WORLD_SIZE");
  hocclUniqueId id;
  if (!exchangeId(rank, argv[4], &id)) return fail(rank, "could not exchange the unique id");
  hocclComm_t comm = nullptr;
  hocclResult_t rc = hocclCommInitRank(&comm, n, id, rank);
  if (scenario == "config") {
    // Rank 1 was started with another HOCCL_SLOTS: every rank must refuse.
    if (rc == hocclSuccess) return fail(rank, "init succeeded despite differing HOCCL_SLOTS");
    const char* msg = hocclGetLastError(nullptr);
    return contains(msg, "HOCCL_SLOTS") && contains(msg, "rank 1") ? 0 : fail(rank, msg);
  }
  if (rc != hocclSuccess) return fail(rank, std::string("init: ") + hocclGetLastError(nullptr));
  int result = 0;
  if (scenario == "full") {
    result = runFull(comm, rank, n);
  } else if (scenario == "mismatch") {
    std::vector<float> buf(1001, 1.0f);
    rc = hocclAllReduce(buf.data(), buf.data(), rank == 1 ? 1001 : 1000, hocclFloat, hocclSum, comm, nullptr);
    const char* msg = hocclGetLastError(comm);
    if (rc != hocclInvalidUsage || !contains(msg, "mismatch")) result = fail(rank, std::string("expected a mismatch, got: ") + msg);
    else fprintf(stderr, "worker rank %d saw: %s\n", rank, msg);
  } else if (scenario == "loop") {
    result = runLoop(comm, rank, 120);
  } else if (scenario == "late") {
    result = runLate(comm, rank, n);
  } else if (scenario == "idle-watch") {
    result = runIdleWatch(comm, rank, 60);
  } else if (scenario == "flight-hang" || scenario == "flight-mismatch") {
    // Two calls alike, then a third that the last rank never makes (it asks
    // for its flight recorder's dump by signal, then stays away past the
    // others' HOCCL_TIMEOUT), or makes with twice the count.
    const bool hang = scenario == "flight-hang";
    std::vector<float> buf(2 << 20, 1.0f);
    const size_t count = 1 << 20;
    for (int i = 0; i < 2 && result == 0; ++i)
      if (hocclAllReduce(buf.data(), buf.data(), count, hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
        result = fail(rank, std::string("AllReduce: ") + hocclGetLastError(comm));
    // The odd rank waits until the others have surely finished call #2: its
    // mismatch would otherwise stop a slow one still in call #2.
    if (result == 0 && rank == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (result == 0 && hang && rank == n - 1) {
      kill(getpid(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::seconds(6));
    } else if (result == 0) {
      rc = hocclAllReduce(buf.data(), buf.data(), !hang && rank == n - 1 ? 2 * count : count, hocclFloat, hocclSum,
                          comm, nullptr);
      if (rc == hocclSuccess) result = fail(rank, "call #3 succeeded");
      else fprintf(stderr, "worker rank %d saw: %s\n", rank, hocclGetLastError(comm));
    }
  } else if (scenario == "die") {
    // The last rank dies before the call; the others must learn it quickly.
    if (rank == n - 1) _exit(42);
    std::vector<float> buf(1 << 20, 1.0f);
    rc = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr);
    const char* msg = hocclGetLastError(comm);
    if (rc != hocclRemoteError || !contains(msg, "exited")) result = fail(rank, std::string("expected a remote error, got: ") + msg);
    else fprintf(stderr, "worker rank %d saw: %s\n", rank, msg);
  } else if (scenario == "idle-die" || scenario == "idle-leave") {
    // Connections are made by a first call; then the last rank exits
    // without freeing its communicator (idle-die) or after freeing it
    // (idle-leave) while the others only poll hocclCommGetAsyncError.
    bool dies = scenario == "idle-die";
    std::vector<float> buf(1024, 1.0f);
    if (hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
      return fail(rank, std::string("AllReduce: ") + hocclGetLastError(comm));
    if (rank == n - 1) {
      if (dies) _exit(42);
      hocclCommDestroy(comm);
      return 0;
    }
    double start = epochSec();
    hocclResult_t async = hocclSuccess;
    while (async == hocclSuccess && epochSec() - start < (dies ? 20 : 3)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (hocclCommGetAsyncError(comm, &async) != hocclSuccess) return fail(rank, "hocclCommGetAsyncError failed");
    }
    const char* msg = hocclGetLastError(comm);
    std::string culprit = "peer rank " + std::to_string(n - 1);
    if (dies && (async != hocclRemoteError || !contains(msg, culprit.c_str())))
      result = fail(rank, "expected an async remote error naming " + culprit + ", got " + std::to_string(async) + ": " + msg);
    else if (!dies && async != hocclSuccess)
      result = fail(rank, std::string("a peer that freed its communicator was reported: ") + msg);
    else
      fprintf(stderr, "worker rank %d: async %d after %.2f s: %s\n", rank, static_cast<int>(async), epochSec() - start,
              dies ? msg : "");
  } else {
    result = fail(rank, "unknown scenario " + scenario);
  }
  hocclCommDestroy(comm);
  return result;
}
