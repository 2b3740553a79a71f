// Schedule <-> device plan (plan.h).
#include "src/exec/cuda/plan.h"

#include <cstring>
#include <limits>

namespace hoccl::cuda {
namespace {

Status bad(const std::string& what) { return Status(hocclInvalidArgument, "device plan: " + what); }

std::string where(size_t c, size_t s) { return "channel " + std::to_string(c) + " step " + std::to_string(s); }

bool knownBuf(uint8_t b) { return b <= uint8_t(Buf::Part); }

// The connection index of (peer, send) in channel `ch`'s table, adding it
// when new; -1 for no peer.
int connIndex(std::vector<DevConn>* conns, const DevChannel& ch, int32_t peer, bool send) {
  if (peer < 0) return -1;
  for (uint32_t i = 0; i < ch.nconns; ++i) {
    const DevConn& c = (*conns)[ch.firstConn + i];
    if (c.peer == peer && c.send == uint8_t(send)) return int(i);
  }
  DevConn c{};
  c.peer = peer;
  c.send = send ? 1 : 0;
  conns->push_back(c);
  return int(conns->size() - ch.firstConn - 1);
}

}  // namespace

std::vector<uint8_t> DevPlan::image() const {
  const DevPlanLayout l = planLayout(channels.size(), conns.size(), steps.size());
  std::vector<uint8_t> out(l.bytes, 0);
  std::memcpy(out.data(), &header, sizeof header);
  if (!channels.empty()) std::memcpy(out.data() + l.channels, channels.data(), channels.size() * sizeof(DevChannel));
  if (!conns.empty()) std::memcpy(out.data() + l.conns, conns.data(), conns.size() * sizeof(DevConn));
  if (!steps.empty()) std::memcpy(out.data() + l.steps, steps.data(), steps.size() * sizeof(DevStep));
  return out;
}

Status flattenSchedule(const Schedule& s, DevPlan* out) {
  DevPlan p;
  const ScheduleKey& k = s.key;
  p.header.magic = kPlanMagic;
  p.header.version = kPlanVersion;
  p.header.coll = uint8_t(k.coll);
  p.header.inPlace = k.inPlace ? 1 : 0;
  p.header.nranks = k.nranks;
  p.header.rank = k.rank;
  p.header.root = k.root;
  p.header.pipelineChunks = k.pipelineChunks;
  p.header.count = k.count;
  p.header.scratchCount = s.scratchCount;
  p.header.maxStepCount = k.maxStepCount;
  constexpr size_t kMax32 = std::numeric_limits<uint32_t>::max();
  if (s.channels.size() > kMax32 || s.stepCount() > kMax32) return bad("more than 2^32 channels or steps");
  for (size_t c = 0; c < s.channels.size(); ++c) {
    const Channel& src = s.channels[c];
    DevChannel ch{};
    ch.firstStep = uint32_t(p.steps.size());
    ch.nsteps = uint32_t(src.steps.size());
    ch.firstConn = uint32_t(p.conns.size());
    ch.link = src.link;
    for (size_t i = 0; i < src.steps.size(); ++i) {
      const Step& st = src.steps[i];
      if (st.src.part > kMax32 || st.dst.part > kMax32) return bad(where(c, i) + ": part index beyond 2^32");
      DevStep d{};
      d.srcOff = st.src.offset;
      d.dstOff = st.dst.offset;
      d.count = st.count;
      d.depStep = st.depStep;
      d.depChannel = st.depChannel;
      d.srcPart = st.src.part;
      d.dstPart = st.dst.part;
      d.srcBuf = uint8_t(st.src.buf);
      d.dstBuf = uint8_t(st.dst.buf);
      d.flags = uint8_t((st.reduce ? kStepReduce : 0) | (st.zeroCopyEligible ? kStepZeroCopy : 0));
      const int r = connIndex(&p.conns, ch, st.recvPeer, false);
      ch.nconns = uint32_t(p.conns.size() - ch.firstConn);
      const int w = connIndex(&p.conns, ch, st.sendPeer, true);
      ch.nconns = uint32_t(p.conns.size() - ch.firstConn);
      if (ch.nconns > uint32_t(std::numeric_limits<int16_t>::max()))
        return bad("channel " + std::to_string(c) + " talks to more than 32767 peers");
      d.recvConn = int16_t(r);
      d.sendConn = int16_t(w);
      p.steps.push_back(d);
    }
    p.channels.push_back(ch);
  }
  p.header.nchannels = uint32_t(p.channels.size());
  p.header.nconns = uint32_t(p.conns.size());
  p.header.nsteps = uint32_t(p.steps.size());
  *out = std::move(p);
  return Status();
}

Status readPlanImage(const uint8_t* data, size_t size, DevPlan* out) {
  DevPlan p;
  if (size < sizeof(DevPlanHeader)) return bad("image of " + std::to_string(size) + " bytes has no header");
  std::memcpy(&p.header, data, sizeof p.header);
  const DevPlanHeader& h = p.header;
  if (h.magic != kPlanMagic) return bad("not a plan image (bad magic)");
  if (h.version != kPlanVersion)
    return bad("plan version " + std::to_string(h.version) + ", this build reads " + std::to_string(kPlanVersion));
  if (h.coll > uint8_t(CollKind::SendRecv)) return bad("unknown collective " + std::to_string(h.coll));
  if (h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks || h.root < 0 || h.root >= h.nranks)
    return bad("rank " + std::to_string(h.rank) + " / root " + std::to_string(h.root) + " of " +
               std::to_string(h.nranks) + " ranks");
  const DevPlanLayout l = planLayout(h.nchannels, h.nconns, h.nsteps);
  if (l.bytes != size)
    return bad("image of " + std::to_string(size) + " bytes, its header describes " + std::to_string(l.bytes));
  p.channels.resize(h.nchannels);
  p.conns.resize(h.nconns);
  p.steps.resize(h.nsteps);
  if (h.nchannels) std::memcpy(p.channels.data(), data + l.channels, h.nchannels * sizeof(DevChannel));
  if (h.nconns) std::memcpy(p.conns.data(), data + l.conns, h.nconns * sizeof(DevConn));
  if (h.nsteps) std::memcpy(p.steps.data(), data + l.steps, h.nsteps * sizeof(DevStep));
  for (const DevConn& c : p.conns)
    if (c.peer < 0 || c.peer >= h.nranks || c.send > 1) return bad("a connection names peer " + std::to_string(c.peer));
  for (size_t c = 0; c < p.channels.size(); ++c) {
    const DevChannel& ch = p.channels[c];
    if (uint64_t(ch.firstStep) + ch.nsteps > h.nsteps || uint64_t(ch.firstConn) + ch.nconns > h.nconns)
      return bad("channel " + std::to_string(c) + "'s steps or connections lie outside the image");
    for (uint32_t i = 0; i < ch.nsteps; ++i) {
      const DevStep& d = p.steps[ch.firstStep + i];
      if (!knownBuf(d.srcBuf) || !knownBuf(d.dstBuf) || (d.flags & ~uint8_t(kStepReduce | kStepZeroCopy)))
        return bad(where(c, i) + ": unknown buffer or flag");
      if (d.recvConn >= int32_t(ch.nconns) || d.sendConn >= int32_t(ch.nconns) || d.recvConn < -1 ||
          d.sendConn < -1)
        return bad(where(c, i) + ": connection outside the channel's " + std::to_string(ch.nconns));
      if ((d.recvConn >= 0 && p.conns[ch.firstConn + d.recvConn].send) ||
          (d.sendConn >= 0 && !p.conns[ch.firstConn + d.sendConn].send))
        return bad(where(c, i) + ": a receive on a sending connection or the reverse");
      if ((d.depChannel < 0) != (d.depStep < 0)) return bad(where(c, i) + ": half a dependency");
      if (d.depChannel >= 0 && (uint32_t(d.depChannel) >= h.nchannels || uint32_t(d.depChannel) == c ||
                                uint32_t(d.depStep) >= p.channels[d.depChannel].nsteps))
        return bad(where(c, i) + ": depends on channel " + std::to_string(d.depChannel) + " step " +
                   std::to_string(d.depStep) + ", which does not exist");
      constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
      if (d.srcOff > kMax - d.count || d.dstOff > kMax - d.count) return bad(where(c, i) + ": offset overflows");
    }
  }
  *out = std::move(p);
  return Status();
}

Schedule unflattenPlan(const DevPlan& p) {
  Schedule s;
  const DevPlanHeader& h = p.header;
  s.key.coll = CollKind(h.coll);
  s.key.inPlace = h.inPlace != 0;
  s.key.nranks = h.nranks;
  s.key.rank = h.rank;
  s.key.root = h.root;
  s.key.pipelineChunks = h.pipelineChunks;
  s.key.count = h.count;
  s.key.maxStepCount = h.maxStepCount;
  s.key.nchannels = int(h.nchannels);
  s.scratchCount = h.scratchCount;
  for (const DevChannel& ch : p.channels) {
    Channel c;
    c.link = ch.link;
    for (uint32_t i = 0; i < ch.nsteps; ++i) {
      const DevStep& d = p.steps[ch.firstStep + i];
      Step st;
      st.recvPeer = d.recvConn >= 0 ? p.conns[ch.firstConn + d.recvConn].peer : -1;
      st.sendPeer = d.sendConn >= 0 ? p.conns[ch.firstConn + d.sendConn].peer : -1;
      st.reduce = d.flags & kStepReduce;
      st.zeroCopyEligible = d.flags & kStepZeroCopy;
      st.src = Slice{Buf(d.srcBuf), d.srcOff, d.srcPart};
      st.dst = Slice{Buf(d.dstBuf), d.dstOff, d.dstPart};
      st.count = d.count;
      st.depChannel = d.depChannel;
      st.depStep = d.depStep;
      c.steps.push_back(st);
    }
    s.channels.push_back(std::move(c));
  }
  return s;
}

}  // namespace hoccl::cuda
