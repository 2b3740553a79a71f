// Framing of bootstrap messages: every frame carries the job magic, so a
// stale or foreign peer is recognised on its first message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "base/socket.h"

namespace hoccl {

struct FrameHeader {
  uint64_t magic;
  uint32_t tag;
  uint32_t len;
};

constexpr uint32_t kMaxFrameBytes = 64u << 20;
// The rank table must fit one frame.
constexpr int kMaxRanks = static_cast<int>(kMaxFrameBytes / sizeof(RankInfo));

// Tags used between a rank and the root.
constexpr uint32_t kTagRootHello = 1;
constexpr uint32_t kTagRootTable = 2;
constexpr uint32_t kTagRootError = 3;
// First frame on a rank-to-rank connection: the sender's rank.
constexpr uint32_t kTagPeerHello = 4;
// The only frame of a short connection: a rank stopped and tells the others
// (AbortNotice), so ranks that never talk to the culprit stop too.
constexpr uint32_t kTagAbort = 5;
// The rendezvous' answer when ranks are missing at the deadline (their list).
constexpr uint32_t kTagRootTimeout = 6;
// A rank that ran out of something before it could join says so (a
// JoinFailure), and the rendezvous answers every rank with that, or with
// its own failure (text), at once.
constexpr uint32_t kTagRootJoinFailed = 7;
constexpr uint32_t kTagRootFailed = 8;
// The only frame of a short connection: a stalled collective's signature
// (CallNotice), sent to the ranks it waits on.
constexpr uint32_t kTagCallNotice = 9;

struct RootHello {
  uint32_t protocol;
  int32_t rank;
  int32_t nranks;
  int32_t libVersion;
  RankInfo info;
  char fingerprint[512];
  // The rank's HOCCL_TIMEOUT: the rendezvous stops waiting for missing
  // ranks by the earliest deadline a joined rank has, so each gets the
  // list of missing ranks before its own wait ends.
  int32_t timeoutMs;
};

struct AbortNotice {
  int32_t rank;  // the rank that stopped
  int32_t code;  // its hocclResult_t
  char msg[1024];
};

struct JoinFailure {
  int32_t rank;
  int32_t nranks;  // so the rendezvous knows how many ranks to answer
  int32_t code;    // hocclResult_t
  char msg[1024];
};

// Decoders of what arrives from the network. They are pure functions of the
// bytes, so fuzz/fuzz_bootstrap_wire.cc runs them without sockets. Anything
// they accept is safe to use as is: strings are terminated, numbers in range.
Status decodeFrameHeader(const void* bytes, size_t n, FrameHeader* out);
// A hello the root can act on: this protocol, nranks >= 1, rank in range.
Status decodeRootHello(const std::string& payload, RootHello* out);
Status decodeRankTable(const std::string& payload, int nranks, std::vector<RankInfo>* out);
Status decodePeerHello(const std::string& payload, int nranks, int* from);
Status decodeAbortNotice(const std::string& payload, int nranks, AbortNotice* out);
// A notice whose rank is in range (its call's fields are checked by the
// communicator, which knows their ranges).
Status decodeCallNotice(const std::string& payload, int nranks, CallNotice* out);
Status decodeJoinFailure(const std::string& payload, JoinFailure* out);

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
