// Call hashes and failure records of device-plan runs (interp_record.h).
#include "src/exec/cuda/interp_record.h"

namespace hoccl::cuda {

uint64_t callHash(uint8_t coll, uint64_t count, DType t, RedOp op, int root, uint64_t opSeq) {
  const uint64_t words[] = {coll, count, uint64_t(t), uint64_t(op), uint64_t(uint32_t(root)), opSeq};
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words' bytes
  for (uint64_t w : words)
    for (int b = 0; b < 8; ++b) h = (h ^ ((w >> (8 * b)) & 0xff)) * 1099511628211ull;
  return h;
}

std::string describeFailure(const DevControl& k) {
  static const char* const kWentAway =
      "the other end of the connection went away (its rank destroyed its communicator or exited)";
  static const char* const kCodes[] = {"ok",      "aborted", "header mismatch", "timed out", "unsupported step",
                                       "stopped", kWentAway};
  const char* code = k.code < 7 ? kCodes[k.code] : "unknown failure";
  std::string where = "rank " + std::to_string(k.rank) + " channel " + std::to_string(k.channel) + " step " +
                      std::to_string(k.step);
  const std::string peer = std::to_string(k.peer), want = std::to_string(k.expected),
                    got = std::to_string(k.got);
  std::string what;
  switch (k.what) {
    case kWhatRecv:
      what = "waiting to receive from rank " + peer + " (message " + want + " on this connection, " + got +
             " arrived)";
      break;
    case kWhatSend:
      what = "waiting for a free slot to send to rank " + peer + " (" + got + " of the messages sent were taken, " +
             want + " needed)";
      break;
    case kWhatDep: what = "waiting for channel " + peer + " to complete step " + std::to_string(k.expected - 1); break;
    case kWhatCall: what = "message from rank " + peer + " belongs to another call (hash " + got + ", expected " + want + ")"; break;
    case kWhatBytes: what = "message from rank " + peer + " has " + got + " bytes, expected " + want; break;
    case kWhatSeq: what = "message from rank " + peer + " is number " + got + ", expected " + want; break;
    case kWhatPart: what = "point-to-point buffers are not supported"; break;
    case kWhatStart: what = "not started: the communicator was aborted before this launch began"; break;
    default: what = "?"; break;
  }
  return std::string("device plan interpreter: ") + where + ": " + code + ", " + what;
}

Status runStatus(const DevControl& k) {
  if (k.code == kDevOk) return Status();
  const hocclResult_t rc = k.code == kDevMismatch    ? hocclInvalidUsage
                           : k.code == kDevTimeout   ? hocclTimeout
                           : k.code == kDevAborted || k.code == kDevClosed ? hocclRemoteError
                                                     : hocclInvalidArgument;
  return Status(rc, describeFailure(k));
}


Status readRankPlan(const std::vector<uint8_t>& image, int rank, int nranks, uint64_t sliceElems, RankPlan* out) {
  out->edges.clear();
  HOCCL_TRY(readPlanImage(image.data(), image.size(), &out->plan));
  const DevPlan& p = out->plan;
  const DevPlanHeader& h = p.header;
  if (h.rank != rank || h.nranks != nranks)
    return errorf(hocclInvalidArgument, "device plan interpreter: plan %d is rank %d of %d", rank, h.rank, h.nranks);
  if (h.maxStepCount > uint64_t(kDevSlots / 2) * sliceElems)
    return errorf(hocclInvalidArgument,
                  "device plan interpreter: rank %d's steps may carry %llu elements, more than half of "
                  "the %u slots of %llu", rank, static_cast<unsigned long long>(h.maxStepCount), kDevSlots,
                  static_cast<unsigned long long>(sliceElems));
  for (size_t c = 0; c < p.channels.size(); ++c) {
    const DevChannel& ch = p.channels[c];
    const int link = ch.link >= 0 ? ch.link : int(c);
    for (uint32_t i = 0; i < ch.nconns; ++i) {
      const DevConn& cn = p.conns[ch.firstConn + i];
      out->edges.push_back(cn.send ? DeviceEdge{rank, cn.peer, link} : DeviceEdge{cn.peer, rank, link});
    }
  }
  return Status();
}

}  // namespace hoccl::cuda
