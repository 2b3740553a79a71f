// Bootstrap messages as a peer (or anything that connects to a rank's or
// the rendezvous' port) sends them: a stream of frames, each header then
// payload, decoded as the receiving side does and then used as it uses them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "src/bootstrap/wire.h"
#include "src/topo/topology.h"

using namespace hoccl;

// The seed corpus (fuzz/corpus/bootstrap_wire, made by make_seeds.py) was
// written for these layouts.
static_assert(sizeof(FrameHeader) == 16);
static_assert(sizeof(RankInfo) == 228);
static_assert(sizeof(RootHello) == 760);
static_assert(sizeof(AbortNotice) == 1032);

namespace {

// What the receiver does with a decoded record: format it into messages.
volatile size_t g_sink;  // keeps the uses from being optimised away

size_t use(const RankInfo& info) { return strlen(info.hostId) + strlen(info.machineId) + info.listenAddr.toString().size(); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  size_t sink = 0;
  while (pos < size) {
    FrameHeader h;
    if (!decodeFrameHeader(data + pos, size - pos, &h).ok()) break;
    pos += sizeof h;
    size_t len = std::min<size_t>(h.len, size - pos);
    std::string payload(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
    switch (h.tag) {
      case kTagRootHello: {
        RootHello hello;
        if (decodeRootHello(payload, &hello).ok()) sink += use(hello.info) + strlen(hello.fingerprint);
        break;
      }
      case kTagRootTable: {
        std::vector<RankInfo> table;
        int nranks = static_cast<int>(std::max<size_t>(1, payload.size() / sizeof(RankInfo)));
        if (decodeRankTable(payload, nranks, &table).ok())
          for (const RankInfo& info : table) sink += use(info);
        break;
      }
      case kTagPeerHello: {
        int from = -1;
        if (decodePeerHello(payload, 8, &from).ok() && (from < 0 || from >= 8)) __builtin_trap();
        break;
      }
      case kTagAbort: {
        AbortNotice n;
        if (decodeAbortNotice(payload, 8, &n).ok()) sink += strlen(n.msg) + static_cast<size_t>(n.code);
        break;
      }
      case kTagCallNotice: {
        CallNotice n;
        if (decodeCallNotice(payload, 8, &n).ok() && (n.rank < 0 || n.rank >= 8)) __builtin_trap();
        break;
      }
      case kTagRootJoinFailed: {
        JoinFailure j;
        if (decodeJoinFailure(payload, &j).ok() && (j.rank < 0 || j.rank >= j.nranks)) __builtin_trap();
        if (decodeJoinFailure(payload, &j).ok()) sink += strlen(j.msg);
        break;
      }
      default: {
        // Node records travel through the bootstrap's allGather at init.
        topo::NodeInfo node;
        if (topo::deserializeNode(payload, &node).ok()) sink += node.nics.size();
        break;
      }
    }
  }
  g_sink = sink;
  return 0;
}
