// The device plan: one rank's Schedule as flat, fixed-layout arrays that a
// kernel can walk (one CTA per channel, steps in order) and that the host
// interpreter reads the same way. Plain data only (no STL, no pointers), so
// nvcc and g++ compile the same layout; the static_asserts pin it.
//
// An image (what is uploaded once per cached schedule) is
//   DevPlanHeader | DevChannel[nchannels] | DevConn[nconns] | DevStep[nsteps]
// each array starting on a 16-byte boundary. Offsets and counts are in
// elements, as in the Schedule.
#pragma once

#include <cstdint>

#include "base/hd.h"

namespace hoccl::cuda {

inline constexpr uint32_t kPlanMagic = 0x504c4e48;  // "HNLP" read as little-endian bytes: H N L P
inline constexpr uint32_t kPlanVersion = 1;

// The CollKind values the interpreter itself tells apart (avg's division,
// interp.h); interp_host.cc checks them against algorithms/schedule.h.
enum DevColl : uint8_t { kCollAllReduce = 0, kCollReduceScatter = 1, kCollReduce = 4 };

// The key fields a run needs (the grouping and all-to-all-v layout stay on
// the host: the steps already encode what they decided).
struct DevPlanHeader {
  uint32_t magic;
  uint32_t version;
  uint8_t coll;      // CollKind
  uint8_t inPlace;
  uint16_t reserved0;
  int32_t nranks;
  int32_t rank;
  int32_t root;
  uint32_t nchannels;
  uint32_t nconns;
  uint32_t nsteps;
  int32_t pipelineChunks;
  uint64_t count;
  uint64_t scratchCount;
  uint64_t maxStepCount;
};
static_assert(sizeof(DevPlanHeader) == 64, "DevPlanHeader layout");

// A channel: its steps and the connections they name.
struct DevChannel {
  uint32_t firstStep;
  uint32_t nsteps;
  uint32_t firstConn;
  uint32_t nconns;
  int32_t link;  // -1: the channel's own index (Channel::link)
  uint32_t reserved;
};
static_assert(sizeof(DevChannel) == 24, "DevChannel layout");

// One connection of a channel: receives from or sends to `peer` on the
// channel's link. A channel has at most one of each per peer.
struct DevConn {
  int32_t peer;
  uint8_t send;  // 0: receive, 1: send
  uint8_t reserved[3];
};
static_assert(sizeof(DevConn) == 8, "DevConn layout");

enum DevStepFlags : uint8_t { kStepReduce = 1, kStepZeroCopy = 2 };

// A Step, with its peers as indexes into the channel's connections.
struct DevStep {
  uint64_t srcOff;
  uint64_t dstOff;
  uint64_t count;
  int32_t depStep;     // -1: none
  int32_t depChannel;  // -1: none
  uint32_t srcPart;    // Buf::Part only
  uint32_t dstPart;
  int16_t recvConn;    // index in the channel's connections, -1: none
  int16_t sendConn;
  uint8_t srcBuf;      // Buf
  uint8_t dstBuf;
  uint8_t flags;       // DevStepFlags
  uint8_t reserved;
};
static_assert(sizeof(DevStep) == 48, "DevStep layout");

// Byte offsets of the arrays in an image of this shape.
struct DevPlanLayout {
  uint64_t channels, conns, steps, bytes;
};
HOCCL_HD inline constexpr uint64_t planAlign(uint64_t x) { return (x + 15) & ~uint64_t(15); }
HOCCL_HD inline constexpr DevPlanLayout planLayout(uint64_t nchannels, uint64_t nconns, uint64_t nsteps) {
  DevPlanLayout l{};
  l.channels = planAlign(sizeof(DevPlanHeader));
  l.conns = planAlign(l.channels + nchannels * sizeof(DevChannel));
  l.steps = planAlign(l.conns + nconns * sizeof(DevConn));
  l.bytes = planAlign(l.steps + nsteps * sizeof(DevStep));
  return l;
}

}  // namespace hoccl::cuda
