// The schedule simulator (sim.h).
#include "src/tune/sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <vector>

namespace hoccl {
namespace tune {
namespace {

struct Chan {
  int rank = 0, index = 0;
  const std::vector<Step>* steps = nullptr;
  size_t step = 0;
  uint64_t piece = 0;
  double last = 0;                // when its previous piece finished locally
  std::vector<double> stepDone;   // per step, once finished
  bool queued = false;
  bool finished() const { return step >= steps->size(); }
};

uint64_t piecesOf(uint64_t bytes, const SimOptions& o) {
  if (bytes == 0) return 1;
  const uint64_t n = (bytes + o.pieceBytes - 1) / o.pieceBytes;
  return std::clamp<uint64_t>(n, 1, uint64_t(std::max(o.maxPiecesPerStep, 1)));
}

// Bytes of piece i of a message of `bytes` cut into n pieces.
double pieceBytes(uint64_t bytes, uint64_t n, uint64_t i) { return double(partSize(bytes, n, i)); }

class Sim {
 public:
  Sim(const Machine& m, const std::vector<Schedule>& s, const SimOptions& o)
      : m_(m),
        o_(o),
        P_(m.nranks()),
        N_(m.nnodes()),
        L_(m.nleaves()),
        nicRate_(m.links.net.bytesPerUs()),
        netBurst_(m.links.net.burstKB * 1000),
        upRate_(m.links.spine.bytesPerUs()),
        upBurst_(m.links.spine.burstKB * 1000) {
    rankFree_.assign(size_t(P_), 0);
    memFree_.assign(size_t(N_), 0);
    cpuFree_.assign(size_t(N_), 0);
    nodeRanks_.assign(size_t(N_), 0);
    for (int r = 0; r < P_; ++r) ++nodeRanks_[size_t(m.nodeOf[size_t(r)])];
    nicOut_.assign(size_t(N_), 0);
    nicIn_.assign(size_t(N_), 0);
    upOut_.assign(size_t(L_), 0);
    upIn_.assign(size_t(L_), 0);
    // Token buckets start empty; they refill while idle within the call.
    // startFrom() gives them what a previous call left instead.
    nicOutTokens_.assign(size_t(N_), 0);
    nicInTokens_.assign(size_t(N_), 0);
    upOutTokens_.assign(size_t(L_), 0);
    upInTokens_.assign(size_t(L_), 0);
    first_.assign(size_t(P_), 0);
    for (int r = 0; r < P_; ++r) {
      first_[size_t(r)] = chans_.size();
      for (size_t c = 0; c < s[size_t(r)].channels.size(); ++c) {
        Chan ch;
        ch.rank = r;
        ch.index = int(c);
        ch.steps = &s[size_t(r)].channels[c].steps;
        ch.stepDone.assign(ch.steps->size(), -1);
        chans_.push_back(ch);
      }
    }
  }

  // Buckets as a call of `prev` left them when it ended: what they held
  // after their last piece plus their refill while idle until the end.
  void startFrom(const Sim& prev, double prevUs) {
    auto carry = [&](std::vector<double>& tokens, const std::vector<double>& was, const std::vector<double>& freeAt,
                     auto rate, double burst) {
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = burst > 0 ? std::min(burst, was[i] + std::max(0.0, prevUs - freeAt[i]) * rate(int(i))) : 0;
    };
    auto nodeRate = [&](int n) { return nicRate(n); };
    auto upRate = [&](int) { return upRate_; };
    carry(nicOutTokens_, prev.nicOutTokens_, prev.nicOut_, nodeRate, netBurst_);
    carry(nicInTokens_, prev.nicInTokens_, prev.nicIn_, nodeRate, netBurst_);
    carry(upOutTokens_, prev.upOutTokens_, prev.upOut_, upRate, upBurst_);
    carry(upInTokens_, prev.upInTokens_, prev.upIn_, upRate, upBurst_);
  }

  SimResult run() {
    for (size_t i = 0; i < chans_.size(); ++i) tryQueue(i);
    while (!pq_.empty()) {
      const auto [t, i] = pq_.top();
      pq_.pop();
      chans_[i].queued = false;
      execute(i, -t);
      tryQueue(i);
      const int r = chans_[i].rank;
      for (size_t j = first_[size_t(r)]; j < chans_.size() && chans_[j].rank == r; ++j) tryQueue(j);
    }
    SimResult res;
    res.pieces = pieces_;
    for (const Chan& c : chans_) {
      if (!c.finished()) {
        const Step& st = (*c.steps)[c.step];
        res.error = "rank " + std::to_string(c.rank) + " channel " + std::to_string(c.index) + " step " +
                    std::to_string(c.step) + " never ran (waits for " +
                    (st.recvPeer >= 0 ? "rank " + std::to_string(st.recvPeer) : std::string("a dependency")) + ")";
        return res;
      }
      res.us = std::max(res.us, c.last);
    }
    res.ok = true;
    return res;
  }

 private:
  std::deque<double>& inbox(int to, int from, int ch) { return inbox_[{to, from, ch}]; }

  // When the channel's next piece could start, or a negative value if it
  // still waits for something not yet simulated.
  double readyAt(const Chan& c) {
    if (c.finished()) return -1;
    const Step& st = (*c.steps)[c.step];
    double t = c.last;
    if (st.depChannel >= 0 && c.piece == 0) {
      const Chan& dep = chans_[first_[size_t(c.rank)] + size_t(st.depChannel)];
      const double d = dep.stepDone[size_t(st.depStep)];
      if (d < 0) return -1;
      t = std::max(t, d);
    }
    if (st.recvPeer >= 0) {
      auto it = inbox_.find({c.rank, st.recvPeer, c.index});
      if (it == inbox_.end() || it->second.empty()) return -1;
      t = std::max(t, it->second.front());
    }
    return t;
  }

  void tryQueue(size_t i) {
    Chan& c = chans_[i];
    if (c.queued) return;
    const double t = readyAt(c);
    if (t < 0) return;
    c.queued = true;
    pq_.push({-t, i});
  }

  void execute(size_t i, double t0) {
    Chan& c = chans_[i];
    const Step& st = (*c.steps)[c.step];
    const LinkModel& lm = m_.links;
    const uint64_t bytes = st.count * o_.elemBytes;
    const uint64_t n = piecesOf(bytes, o_);
    const double b = pieceBytes(bytes, n, c.piece);
    ++pieces_;
    if (st.recvPeer >= 0) inbox(c.rank, st.recvPeer, c.index).pop_front();
    // This rank's pass over the piece: a copy, or a reduction.
    const double copy = lm.shm.bytesPerUs();
    const double rate = st.reduce ? std::min(copy, lm.reduceGbps * 125.0) : copy;
    const int node = m_.nodeOf[size_t(c.rank)];
    double start = std::max(t0, rankFree_[size_t(c.rank)]);
    double done = start + b / rate;
    if (lm.oversubscription > 1) {
      // Ranks outnumber cores: the node's ranks share
      // ranks/oversubscription cores, and each message a rank sends or
      // receives costs CPU beyond its bytes (model.h: msgCpuUs).
      auto msgCpu = [&](int peer) { return lm.messageCpuUs(m_.nnodes(), m_.nodeOf[size_t(peer)] != node); };
      double cpu = b / rate;
      if (st.recvPeer >= 0) cpu += msgCpu(st.recvPeer);
      if (st.sendPeer >= 0) cpu += msgCpu(st.sendPeer);
      const double cores = nodeRanks_[size_t(node)] / lm.oversubscription;
      cpuFree_[size_t(node)] = std::max(cpuFree_[size_t(node)], start) + cpu / cores;
      done = std::max(start + cpu, cpuFree_[size_t(node)]);
    }
    rankFree_[size_t(c.rank)] = done;
    const double mem = b * 2 * (st.reduce ? lm.reduceMemRatio : 1) / (lm.nodeMemGbps * 125.0);
    memFree_[size_t(node)] = std::max(memFree_[size_t(node)], start) + mem;
    done = std::max(done, memFree_[size_t(node)]);
    if (st.sendPeer >= 0) {
      const int to = st.sendPeer, nb = m_.nodeOf[size_t(to)];
      double arrive = 0;
      if (nb == node) {
        arrive = done + lm.latency(lm.shm);
      } else {
        const int la = m_.leafOf[size_t(node)], lb = m_.leafOf[size_t(nb)];
        struct Hop {
          double* freeAt;
          double* tokens;
          double rate, burst;  // bytes per us, bytes
        };
        std::vector<Hop> path;
        if (nicRate_ > 0)
          path.push_back({&nicOut_[size_t(node)], &nicOutTokens_[size_t(node)], nicRate(node), netBurst_});
        double lat = lm.latency(lm.net);
        if (la != lb) {
          lat += lm.latency(lm.spine);
          if (upRate_ > 0) {
            path.push_back({&upOut_[size_t(la)], &upOutTokens_[size_t(la)], upRate_, upBurst_});
            path.push_back({&upIn_[size_t(lb)], &upInTokens_[size_t(lb)], upRate_, upBurst_});
          }
        }
        if (nicRate_ > 0) path.push_back({&nicIn_[size_t(nb)], &nicInTokens_[size_t(nb)], nicRate(nb), netBurst_});
        // Cut-through along the path: a resource serves the piece once it
        // is free and the piece has reached it, and cannot finish before
        // the resource before it has. A link with a token bucket refills
        // it while idle and passes what the tokens cover at once.
        double begin = done, end = done;
        for (Hop& h : path) {
          const double start = std::max(begin, *h.freeAt);
          if (h.burst > 0) {
            *h.tokens = std::min(h.burst, *h.tokens + (start - *h.freeAt) * h.rate);
          }
          const double free = std::min(*h.tokens, b);
          *h.tokens -= free;
          const double d = (b - free) / h.rate;
          begin = std::max(start, end - d);
          end = begin + d;
          *h.freeAt = end;
        }
        if (lm.flowGbps > 0) end = std::max(end, done + b / (lm.flowGbps * 125.0));
        arrive = end + lat;
      }
      inbox(to, c.rank, c.index).push_back(arrive);
      const size_t j = first_[size_t(to)] + size_t(c.index);
      tryQueue(j);
    }
    c.last = done;
    if (++c.piece >= n) {
      c.stepDone[c.step] = done;
      ++c.step;
      c.piece = 0;
    }
  }

  // A node's network rate, all its links together (bytes/us).
  double nicRate(int node) const { return nicRate_ * m_.nics(node); }

  const Machine& m_;
  SimOptions o_;
  int P_, N_, L_;
  double nicRate_, netBurst_, upRate_, upBurst_;  // one link's rate (bytes/us) and bucket (bytes), from m_.links
  std::vector<Chan> chans_;
  std::vector<size_t> first_;
  std::vector<double> rankFree_, memFree_, cpuFree_, nodeRanks_, nicOut_, nicIn_, upOut_, upIn_;
  std::vector<double> nicOutTokens_, nicInTokens_, upOutTokens_, upInTokens_;
  std::map<std::tuple<int, int, int>, std::deque<double>> inbox_;
  std::priority_queue<std::pair<double, size_t>> pq_;
  uint64_t pieces_ = 0;
};

}  // namespace

SimResult simulate(const Machine& m, CollKind coll, AlgoId algo, uint64_t bytes, int nchannels, int pipelineChunks,
                   const SimOptions& opt) {
  const int P = m.nranks();
  ScheduleKey key;
  key.coll = coll;
  key.nranks = P;
  const uint64_t elems = bytes / std::max<size_t>(opt.elemBytes, 1);
  key.count = coll == CollKind::ReduceScatter || coll == CollKind::AllGather ? elems / uint64_t(std::max(P, 1)) : elems;
  key.nchannels = std::max(nchannels, 1);
  key.pipelineChunks = pipelineChunks;
  // As the API sets it with the default slots (8) and slice (128 KiB).
  key.maxStepCount = 4 * (128 * 1024) / std::max<size_t>(opt.elemBytes, 1);
  key.groups = std::make_shared<const Grouping>(m.grouping());
  const AlgoInfo& info = algorithmInfo(algo);
  std::vector<Schedule> all;
  all.reserve(size_t(P));
  for (int r = 0; r < P; ++r) {
    key.rank = r;
    all.push_back(info.build(key));
  }
  // Benchmarks time a loop of calls: each starts with the buckets the one
  // before left, refilled while that one's tail kept the links idle (a
  // leader's broadcast inside its node after the last network step). The
  // first call starts with them empty; later ones from their predecessor's
  // end, until the time settles (within 0.5%, at most 4 calls).
  const LinkModel& lm = m.links;
  auto sim = std::make_unique<Sim>(m, all, opt);
  SimResult res = sim->run();
  uint64_t pieces = res.pieces;
  for (int call = 1; call < 4 && res.ok && (lm.net.burstKB > 0 || lm.spine.burstKB > 0); ++call) {
    auto next = std::make_unique<Sim>(m, all, opt);
    next->startFrom(*sim, res.us);
    SimResult r = next->run();
    pieces += r.pieces;
    const bool settled = std::abs(r.us - res.us) <= 0.005 * res.us;
    res = r;
    sim = std::move(next);
    if (settled) break;
  }
  res.pieces = pieces;
  return res;
}

}  // namespace tune
}  // namespace hoccl
