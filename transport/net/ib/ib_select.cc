#include "transport/net/ib/ib_select.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>

namespace hoccl {
namespace ibnet {

bool parseHcaRule(const std::string& text, HcaRule* out, std::string* why) {
  *out = HcaRule();
  size_t i = 0;
  while (i < text.size() && (text[i] == '^' || text[i] == '=')) {
    (text[i] == '^' ? out->exclude : out->exact) = true;
    ++i;
  }
  std::string rest = text.substr(i);
  if (rest.empty()) {
    if (i > 0) {
      *why = "\"" + text + "\" lists no device";
      return false;
    }
    return true;
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    HcaRule::Entry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (e.name.empty()) {
      *why = "\"" + text + "\" has an empty device name";
      return false;
    }
    if (colon != std::string::npos) {
      std::string port = item.substr(colon + 1);
      char* end = nullptr;
      long p = strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || p < 1 || p > 255) {
        *why = "\"" + item + "\": the port after ':' must be a number from 1 to 255";
        return false;
      }
      e.port = static_cast<int>(p);
    }
    out->entries.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

bool hcaSelected(const HcaRule& rule, const std::string& device, int port) {
  if (rule.entries.empty()) return true;
  bool listed = false;
  for (const HcaRule::Entry& e : rule.entries) {
    bool nameOk = rule.exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || e.port == port)) listed = true;
  }
  return rule.exclude ? !listed : listed;
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
