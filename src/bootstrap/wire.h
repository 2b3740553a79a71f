// Framing of bootstrap messages: every frame carries the job magic, so a
// stale or foreign peer is recognised on its first message.
#pragma once

#include <cstdint>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/socket.h"

namespace hoccl {

struct FrameHeader {
  uint64_t magic;
  uint32_t tag;
  uint32_t len;
};

constexpr uint32_t kMaxFrameBytes = 64u << 20;

// Tags used between a rank and the root.
constexpr uint32_t kTagRootHello = 1;
constexpr uint32_t kTagRootTable = 2;
constexpr uint32_t kTagRootError = 3;
// First frame on a rank-to-rank connection: the sender's rank.
constexpr uint32_t kTagPeerHello = 4;

struct RootHello {
  uint32_t protocol;
  int32_t rank;
  int32_t nranks;
  int32_t libVersion;
  RankInfo info;
  char fingerprint[512];
};

Status sendFrame(const Socket& s, uint64_t magic, uint32_t tag, const void* data, size_t bytes,
                 const Deadline& dl);
// Receives one frame whatever its magic (the root uses it to answer a
// foreign peer in that peer's own magic).
Status recvFrameRaw(const Socket& s, FrameHeader* h, std::string* payload, const Deadline& dl);
// Receives one frame. A frame with another magic is an error that names
// both magics (a stale or foreign peer).
Status recvFrame(const Socket& s, uint64_t magic, uint32_t* tag, std::string* payload,
                 const Deadline& dl);

}  // namespace hoccl
