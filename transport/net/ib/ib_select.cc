#include "transport/net/ib/ib_select.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>

namespace hoccl {
namespace ibnet {

bool parseHcaRule(const std::string& text, HcaRule* out, std::string* why) {
  return parseNameRule(text, /*withPorts=*/true, out, why);
}

bool hcaSelected(const HcaRule& rule, const std::string& device, int port) {
  return nameRuleSelects(rule, device, port);
}

bool gidIsZero(const uint8_t raw[16]) {
  for (int i = 0; i < 16; ++i)
    if (raw[i]) return false;
  return true;
}

std::string gidText(const uint8_t raw[16]) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, raw, buf, sizeof buf);
  return buf;
}

namespace {

bool ipv4Mapped(const uint8_t raw[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(raw, prefix, sizeof prefix) == 0;
}

bool linkLocal(const uint8_t raw[16]) { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

}  // namespace

int chooseGidIndex(const std::vector<GidEntry>& table, bool ethernet) {
  if (!ethernet) {
    for (const GidEntry& g : table)
      if (g.index == 0 && !gidIsZero(g.raw)) return 0;
    return -1;
  }
  // Ranked preferences; the lowest index wins within a rank.
  auto rank = [](const GidEntry& g) {
    bool v2 = g.type == "RoCE v2";
    if (v2 && ipv4Mapped(g.raw)) return 0;
    if (v2 && !linkLocal(g.raw)) return 1;
    if (v2) return 2;
    return 3;
  };
  int best = -1, bestRank = 4;
  for (const GidEntry& g : table) {
    if (gidIsZero(g.raw)) continue;
    int r = rank(g);
    if (r < bestRank || (r == bestRank && g.index < best)) {
      best = g.index;
      bestRank = r;
    }
  }
  return best;
}

}  // namespace ibnet
}  // namespace hoccl
