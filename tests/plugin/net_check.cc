// Drives a net plugin the way NCCL's proxy does, between two processes (or
// two emulated nodes): listen, handle exchange, non-blocking connect/accept,
// registration, sends and receives from 0 to 64 MiB with 32 in flight,
// grouped receives, close, finalize; then dlclose, a check that the library
// is really gone, and a second load that must work from scratch.
#include "tests/plugin/net_check.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/plugin/check.h"
#include "tests/plugin/loader.h"
#include "tests/plugin/net_api.h"
#include "tests/plugin/oob.h"

namespace pluginharness {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kArena = 80u << 20;  // per direction: the 64 MiB message, or 32 concurrent ones

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

void fill(char* p, size_t n, uint64_t seed) {
  size_t words = n / 8;
  auto* w = reinterpret_cast<uint64_t*>(p);
  for (size_t i = 0; i < words; ++i) w[i] = mix(seed * 0x9e3779b97f4a7c15ull + i);
  for (size_t i = words * 8; i < n; ++i) p[i] = static_cast<char>(mix(seed + i) & 0xff);
}

bool verify(const char* p, size_t n, uint64_t seed) {
  size_t words = n / 8;
  auto* w = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i < words; ++i)
    if (w[i] != mix(seed * 0x9e3779b97f4a7c15ull + i)) return false;
  for (size_t i = words * 8; i < n; ++i)
    if (p[i] != static_cast<char>(mix(seed + i) & 0xff)) return false;
  return true;
}

// Word-aligned arena, registered once per comm like NCCL's staging buffers.
struct Arena {
  std::vector<uint64_t> words = std::vector<uint64_t>(kArena / 8 + 1);
  char* base() { return reinterpret_cast<char*>(words.data()); }
  void* mhandle = nullptr;
};

struct Link {
  void* ctx = nullptr;
  void* lc = nullptr;
  void* sc = nullptr;
  void* rc = nullptr;
  int maxRecvs = 1;
};

// One pending operation the progress loop tests; sends not yet accepted by
// the plugin (NULL request) are posted again, as NCCL's proxy does.
struct Op {
  bool isSend = false;
  int n = 1;
  void* data[NCCL_NET_MAX_REQUESTS] = {};
  size_t sizes[NCCL_NET_MAX_REQUESTS] = {};
  int tags[NCCL_NET_MAX_REQUESTS] = {};
  void* req = nullptr;
  bool done = false;
  int got[NCCL_NET_MAX_REQUESTS] = {};
};

class Session {
 public:
  Session(NetApi& api, Oob& oob, int rank) : api_(api), oob_(oob), rank_(rank) {}

  bool barrier() {
    char a = 1, b = 0;
    std::string err;
    return EXPECT(oob_.exchange(&a, &b, 1, &err), "%s", err.c_str());
  }

  bool connect(void* ctx, Link* link) {
    link->ctx = ctx;
    char mine[NCCL_NET_HANDLE_MAXSIZE] = {}, theirs[NCCL_NET_HANDLE_MAXSIZE] = {};
    if (!EXPECT_OK(api_.listen(ctx, 0, mine, &link->lc)) || !EXPECT(link->lc, "listen gave a NULL listenComm"))
      return false;
    std::string err;
    if (!EXPECT(oob_.exchange(mine, theirs, sizeof mine, &err), "%s", err.c_str())) return false;
    int pendingCalls = 0;
    auto deadline = Clock::now() + std::chrono::seconds(60);
    // Both in one thread, alternating: a blocking connect or accept would hang here.
    while (!link->sc || !link->rc) {
      if (!link->sc && !EXPECT_OK(api_.connect(ctx, 0, theirs, &link->sc))) return false;
      if (!link->rc && !EXPECT_OK(api_.accept(link->lc, &link->rc))) return false;
      if (link->sc && link->rc) break;
      ++pendingCalls;
      if (!EXPECT(Clock::now() < deadline, "connect/accept not done after 60 s")) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    AnyProps p;
    if (EXPECT_OK(api_.properties(0, &p))) link->maxRecvs = p.maxRecvs;
    notef("connected (%d calls returned no comm yet)", pendingCalls);
    return true;
  }

  bool registerArenas(const Link& l) {
    return EXPECT_OK(api_.regMr(l.sc, send_.base(), kArena, NCCL_PTR_HOST, &send_.mhandle)) &&
           EXPECT_OK(api_.regMr(l.rc, recv_.base(), kArena, NCCL_PTR_HOST, &recv_.mhandle));
  }

  bool deregisterArenas(const Link& l) {
    bool ok = EXPECT_OK(api_.deregMr(l.sc, send_.mhandle));
    ok &= EXPECT_OK(api_.deregMr(l.rc, recv_.mhandle));
    return ok;
  }

  bool close(Link* l) {
    bool ok = EXPECT_OK(api_.closeSend(l->sc));
    ok &= EXPECT_OK(api_.closeRecv(l->rc));
    ok &= EXPECT_OK(api_.closeListen(l->lc));
    *l = Link();
    return ok;
  }

  // Posts and progresses every op until all are done.
  bool run(const Link& l, std::vector<Op>& ops, bool optionalHint) {
    auto deadline = Clock::now() + std::chrono::seconds(120);
    size_t left = ops.size();
    while (left > 0) {
      for (Op& op : ops) {
        if (op.done) continue;
        if (!op.req) {
          ncclResult_t r;
          if (op.isSend) {
            r = api_.isend(l.sc, op.data[0], op.sizes[0], op.tags[0], send_.mhandle, &op.req);
          } else {
            void* mhs[NCCL_NET_MAX_REQUESTS];
            std::fill(mhs, mhs + op.n, recv_.mhandle);
            void* hint = optionalHint && op.n == 1 ? reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION) : nullptr;
            r = api_.irecv(l.rc, op.n, op.data, op.sizes, op.tags, mhs, &op.req, hint);
            if (!EXPECT(op.req != reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION),
                        "irecv left NCCL's optional-completion hint as the request"))
              return false;
          }
          if (!EXPECT(r == ncclSuccess, "%s returned %s", op.isSend ? "isend" : "irecv", resultName(r))) return false;
          if (!op.req) continue;  // the plugin is full: post again later
        }
        int done = 0;
        ncclResult_t r = api_.test(op.req, &done, op.got);
        if (!EXPECT(r == ncclSuccess, "test returned %s", resultName(r))) return false;
        if (done) {
          op.done = true;
          --left;
        }
      }
      if (!EXPECT(Clock::now() < deadline, "%zu operations not done after 120 s", left)) return false;
    }
    return true;
  }

  // Receives must be posted by the time the peer's sends are: post them first.
  bool postAllReceivesAccepted(const Link& l, std::vector<Op>& recvs) {
    for (Op& op : recvs) {
      void* mhs[NCCL_NET_MAX_REQUESTS];
      std::fill(mhs, mhs + op.n, recv_.mhandle);
      if (!EXPECT_OK(api_.irecv(l.rc, op.n, op.data, op.sizes, op.tags, mhs, &op.req, nullptr))) return false;
      if (!EXPECT(op.req, "receive %zu of %zu refused: a comm must take %d", &op - recvs.data(), recvs.size(),
                  NCCL_NET_MAX_REQUESTS))
        return false;
    }
    return true;
  }

  uint64_t seed(int fromRank, int index, int tag = 0) const {
    return (static_cast<uint64_t>(fromRank) << 48) ^ (static_cast<uint64_t>(index) << 16) ^ static_cast<uint64_t>(tag);
  }

  // Phase 1: one message each way at a time, 0 B to the largest size.
  bool sweep(const Link& l, size_t maxBytes) {
    std::vector<size_t> sizes = {0, 1, 7, 4096, 65536, (1u << 20) + 3, 4u << 20, 64u << 20};
    int peer = 1 - rank_;
    for (size_t i = 0; i < sizes.size(); ++i) {
      size_t s = std::min(sizes[i], maxBytes);
      fill(send_.base(), s, seed(rank_, static_cast<int>(i)));
      std::vector<Op> ops(2);
      ops[0].data[0] = recv_.base();
      ops[0].sizes[0] = std::min(s + 64, kArena);  // posted larger than sent: test reports the real size
      ops[1].isSend = true;
      ops[1].data[0] = send_.base();
      ops[1].sizes[0] = s;
      if (!run(l, ops, api_.version() >= 9)) return false;
      if (!EXPECT(static_cast<size_t>(ops[0].got[0]) == s, "sweep: received %d bytes, sent %zu", ops[0].got[0], s) ||
          !EXPECT(verify(recv_.base(), s, seed(peer, static_cast<int>(i))), "sweep: %zu-byte message corrupt", s))
        return false;
      if (!barrier()) return false;
    }
    notef("sweep 0 B .. %zu B: ok", std::min(sizes.back(), maxBytes));
    return true;
  }

  // Phase 2: NCCL_NET_MAX_REQUESTS receives and sends in flight at once.
  bool concurrent(const Link& l, size_t maxBytes) {
    const int n = NCCL_NET_MAX_REQUESTS;
    std::vector<size_t> sizes(n);
    uint64_t x = 12345;
    for (int i = 0; i < n; ++i) {
      x = mix(x + static_cast<uint64_t>(i));
      sizes[i] = (i == 5 || i == 20) ? std::min<size_t>(16u << 20, maxBytes) : (x % ((1u << 20) + 1));
      if (i % 7 == 3) sizes[i] = 0;
    }
    std::vector<Op> recvs(n), sends(n);
    size_t off = 0;
    int peer = 1 - rank_;
    for (int i = 0; i < n; ++i) {
      recvs[i].data[0] = recv_.base() + off;
      recvs[i].sizes[0] = sizes[i];
      sends[i].isSend = true;
      sends[i].data[0] = send_.base() + off;
      sends[i].sizes[0] = sizes[i];
      fill(send_.base() + off, sizes[i], seed(rank_, 100 + i));
      off += (sizes[i] + 63) & ~size_t(63);
    }
    if (!postAllReceivesAccepted(l, recvs) || !barrier()) return false;
    std::vector<Op> all = sends;
    all.insert(all.end(), recvs.begin(), recvs.end());
    if (!run(l, all, false)) return false;
    for (int i = 0; i < n; ++i) {
      const Op& r = all[n + i];
      if (!EXPECT(static_cast<size_t>(r.got[0]) == sizes[i], "concurrent: message %d: %d bytes, expected %zu", i,
                  r.got[0], sizes[i]) ||
          !EXPECT(verify(static_cast<char*>(r.data[0]), sizes[i], seed(peer, 100 + i)),
                  "concurrent: message %d corrupt (FIFO order broken?)", i))
        return false;
    }
    notef("%d concurrent messages each way (0 B .. %zu B): ok", n, *std::max_element(sizes.begin(), sizes.end()));
    return barrier();
  }

  // Phase 3: grouped receives, senders' order shuffled within each group.
  bool grouped(const Link& l) {
    int n = std::min(l.maxRecvs, 4);
    if (n < 2) {
      notef("grouped receives: plugin advertises maxRecvs=%d, skipped", l.maxRecvs);
      return true;
    }
    const int groups = 8;
    int peer = 1 - rank_;
    auto sizeOf = [](int g, int j) { return static_cast<size_t>((g * 7919 + j * 104729) % 300000) * (j != 1); };
    std::vector<Op> recvs(groups), sends;
    size_t off = 0;
    for (int g = 0; g < groups; ++g) {
      recvs[g].n = n;
      for (int j = 0; j < n; ++j) {
        recvs[g].data[j] = recv_.base() + off;
        recvs[g].sizes[j] = sizeOf(g, j) + 100;
        recvs[g].tags[j] = 100 + j;
        off += (sizeOf(g, j) + 100 + 63) & ~size_t(63);
      }
    }
    off = 0;
    for (int g = 0; g < groups; ++g)
      for (int k = 0; k < n; ++k) {
        int j = (g % 2) ? n - 1 - k : (k + g) % n;  // not the receiver's order
        Op s;
        s.isSend = true;
        s.data[0] = send_.base() + off;
        s.sizes[0] = sizeOf(g, j);
        s.tags[0] = 100 + j;
        fill(send_.base() + off, s.sizes[0], seed(rank_, 1000 + g, j));
        off += (s.sizes[0] + 63) & ~size_t(63);
        sends.push_back(s);
      }
    if (!postAllReceivesAccepted(l, recvs) || !barrier()) return false;
    std::vector<Op> all = sends;
    all.insert(all.end(), recvs.begin(), recvs.end());
    if (!run(l, all, false)) return false;
    for (int g = 0; g < groups; ++g) {
      const Op& r = all[sends.size() + g];
      for (int j = 0; j < n; ++j)
        if (!EXPECT(static_cast<size_t>(r.got[j]) == sizeOf(g, j), "grouped: group %d buffer %d: %d bytes, expected %zu",
                    g, j, r.got[j], sizeOf(g, j)) ||
            !EXPECT(verify(static_cast<char*>(r.data[j]), sizeOf(g, j), seed(peer, 1000 + g, j)),
                    "grouped: group %d buffer %d (tag %d) holds the wrong message", g, j, 100 + j))
          return false;
    }
    notef("%d grouped receives of %d buffers, sends out of order within groups: ok", groups, n);
    return barrier();
  }

  bool registrationKinds(const Link& l, const AnyProps& p) {
    bool ok = true;
    if (!(p.ptrSupport & NCCL_PTR_CUDA)) {
      void* mh = nullptr;
      ncclResult_t r = api_.regMr(l.sc, send_.base(), 4096, NCCL_PTR_CUDA, &mh);
      ok &= EXPECT(r != ncclSuccess, "regMr(NCCL_PTR_CUDA) succeeded though ptrSupport is %#x", p.ptrSupport);
    }
    void* req = reinterpret_cast<void*>(0xdead);
    int size = 0;
    void* data = recv_.base();
    ok &= EXPECT_OK(api_.iflush(l.rc, 1, &data, &size, &recv_.mhandle, &req));
    for (int i = 0; req && i < 1000000; ++i) {
      int done = 0;
      if (!EXPECT_OK(api_.test(req, &done, nullptr))) return false;
      if (done) req = nullptr;
    }
    return ok && EXPECT(!req, "iflush request never completed");
  }

 private:
  NetApi& api_;
  Oob& oob_;
  int rank_;
  Arena send_, recv_;
};

bool checkProperties(NetApi& api) {
  int n = 0;
  if (!EXPECT_OK(api.devices(&n)) || !EXPECT(n > 0, "devices() = %d", n)) return false;
  bool ok = true;
  for (int d = 0; d < n; ++d) {
    AnyProps p;
    if (!EXPECT_OK(api.properties(d, &p))) return false;
    ok &= EXPECT(p.name && *p.name, "device %d: no name", d);
    ok &= EXPECT(p.ptrSupport & NCCL_PTR_HOST, "device %d: ptrSupport %#x lacks NCCL_PTR_HOST", d, p.ptrSupport);
    ok &= EXPECT(!(p.ptrSupport & ~(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF)), "ptrSupport %#x", p.ptrSupport);
    ok &= EXPECT(p.speed > 0, "device %d: speed %d Mbit/s", d, p.speed);
    ok &= EXPECT(p.maxComms > 0, "device %d: maxComms %d", d, p.maxComms);
    ok &= EXPECT(p.maxRecvs >= 1 && p.maxRecvs <= NCCL_NET_MAX_REQUESTS, "device %d: maxRecvs %d", d, p.maxRecvs);
    ok &= EXPECT(p.netDeviceType == NCCL_NET_DEVICE_HOST && p.netDeviceVersion == NCCL_NET_DEVICE_INVALID_VERSION,
                 "device %d: device type %d version %d (NCCL accepts HOST with the invalid version)", d,
                 p.netDeviceType, p.netDeviceVersion);
    ok &= EXPECT(p.regIsGlobal == 0 || p.regIsGlobal == 1, "regIsGlobal %d", p.regIsGlobal);
    if (p.hasSizes) {
      ok &= EXPECT(p.maxP2pBytes > 0 && p.maxP2pBytes <= NCCL_MAX_NET_SIZE_BYTES,
                   "device %d: maxP2pBytes %zu outside (0, 1 TiB]: NCCL fails connection setup", d, p.maxP2pBytes);
      ok &= EXPECT(p.maxCollBytes > 0 && p.maxCollBytes <= NCCL_MAX_NET_SIZE_BYTES, "maxCollBytes %zu", p.maxCollBytes);
      ok &= EXPECT(p.vNdevs == 1 && p.vDev0 == d, "device %d: vProps {%d, {%d}} (a physical device lists itself)", d,
                   p.vNdevs, p.vDev0);
      ok &= EXPECT(p.forceFlush == 0 || p.forceFlush == 1, "forceFlush %d", p.forceFlush);
    }
    if (p.hasMultiRequest) ok &= EXPECT(p.maxMultiRequestSize >= 1, "maxMultiRequestSize %d", p.maxMultiRequestSize);
    if (p.hasRail)
      ok &= EXPECT(p.railId == NCCL_NET_ID_UNDEF && p.planeId == NCCL_NET_ID_UNDEF,
                   "railId %d planeId %d: TCP knows neither", p.railId, p.planeId);
    notef("device %d: %s pci %s speed %d Mbit/s maxRecvs %d maxComms %d%s%zu", d, p.name, p.pciPath ? p.pciPath : "(virtual)",
          p.speed, p.maxRecvs, p.maxComms, p.hasSizes ? " maxP2pBytes " : "", p.maxP2pBytes);
  }
  AnyProps bad;
  ok &= EXPECT(api.properties(n, &bad) != ncclSuccess, "getProperties(%d) of %d devices succeeded", n, n);
  return ok;
}

struct Loaded {
  Opened lib;
  std::unique_ptr<NetApi> api;
};

bool load(const NetCheckOptions& o, Loaded* out) {
  out->lib = openPluginLib(PluginType::Net, o.plugin);
  if (!EXPECT(out->lib.handle, "could not open net plugin '%s' (tried %zu names; %s)", o.plugin.c_str(),
              out->lib.tried.size(), out->lib.error.c_str()))
    return false;
  std::string sym = "ncclNetPlugin_v" + std::to_string(o.version);
  void* p = dlsym(out->lib.handle, sym.c_str());
  if (!EXPECT(p, "%s not exported by %s", sym.c_str(), out->lib.openedName.c_str())) return false;
  out->api = makeNetApi(o.version, p);
  std::string bad = out->api->structProblems();
  return EXPECT(bad.empty(), "%s: %s", sym.c_str(), bad.c_str()) &&
         EXPECT(strcmp(out->api->name(), "hoccl") == 0, "%s.name is '%s', expected 'hoccl' (NCCL_NET matches it)",
                sym.c_str(), out->api->name());
}

bool unload(Loaded* l) {
  std::string name = l->lib.openedName;
  l->api.reset();
  if (!EXPECT(dlclose(l->lib.handle) == 0, "dlclose: %s", dlerror())) return false;
  l->lib.handle = nullptr;
  return EXPECT(!stillLoaded(name), "%s still mapped after dlclose: its globals would survive NCCL's reload",
                name.c_str());
}

}  // namespace

int runNetCheck(const NetCheckOptions& o) {
  logPrefix = "[rank " + std::to_string(o.rank) + " net v" + std::to_string(o.version) + "] ";
  Oob oob;
  std::string err;
  if (!EXPECT(oob.open(o.rank, o.addr, o.port, 60, &err, o.listenFd), "%s", err.c_str())) return 1;
  Loaded l;
  if (!load(o, &l)) return 1;
  NetApi& api = *l.api;
  notef("loaded %s from '%s' (asked for '%s')", ("ncclNetPlugin_v" + std::to_string(o.version)).c_str(),
        l.lib.openedName.c_str(), o.plugin.c_str());
  Session session(api, oob, o.rank);

  void* ctx = nullptr;
  void* spare = nullptr;
  if (o.skipIfUnavailable) {
    ncclResult_t r = api.init(&ctx, 0x1234abcdull, harnessLogger);
    if (r != ncclSuccess) {
      notef("SKIPPED: init returned %s: this transport is not available here (NCCL_DEBUG=WARN shows why)",
            resultName(r));
      return kSkipped;
    }
  } else if (!EXPECT_OK(api.init(&ctx, 0x1234abcdull, harnessLogger))) {
    return 1;
  }
  if (api.perCommContext()) {
    EXPECT(ctx, "v%d init returned no context", o.version);
    if (!EXPECT_OK(api.init(&spare, 0x5678ull, harnessLogger))) return 1;
    EXPECT(spare && spare != ctx, "two communicators got the same context");
  }
  if (!checkProperties(api)) return 1;
  int expectedWarnings = pluginWarnings;  // the out-of-range getProperties above
  Link link;
  bool ok = session.connect(ctx, &link) && session.registerArenas(link) && session.sweep(link, o.maxBytes);
  // Another communicator going away must not disturb this one.
  if (ok && spare) ok = EXPECT_OK(api.finalize(spare));
  AnyProps props;
  ok = ok && EXPECT_OK(api.properties(0, &props)) && session.concurrent(link, o.maxBytes) && session.grouped(link) &&
       session.registrationKinds(link, props) && session.deregisterArenas(link) && session.barrier() &&
       session.close(&link) && EXPECT_OK(api.finalize(ctx));
  if (!ok) return 1;
  EXPECT(pluginWarnings == expectedWarnings, "the plugin logged %d warning(s) in a clean run",
         pluginWarnings - expectedWarnings);
  if (!unload(&l)) return 1;

  // NCCL dlcloses the plugin after its last communicator and opens it again
  // for the next one.
  if (!load(o, &l)) return 1;
  Session again(*l.api, oob, o.rank);
  ctx = nullptr;
  ok = EXPECT_OK(l.api->init(&ctx, 0x9999ull, harnessLogger)) && again.connect(ctx, &link) &&
       again.registerArenas(link) && again.sweep(link, std::min<size_t>(o.maxBytes, 1u << 20)) &&
       again.deregisterArenas(link) && again.barrier() && again.close(&link) && EXPECT_OK(l.api->finalize(ctx));
  if (!ok || !unload(&l)) return 1;
  notef("dlclose, reload, second session: ok");
  return failures == 0 ? 0 : 1;
}

}  // namespace pluginharness
