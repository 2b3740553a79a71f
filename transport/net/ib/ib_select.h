// Which HCA ports and which GID the verbs transport uses: pure functions over
// names and GID tables, testable without a device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/name_rule.h"

namespace hoccl {
namespace ibnet {

// HOCCL_IB_HCA, as NCCL_IB_HCA: a comma-separated list of "name[:port]";
// names match as prefixes unless the list starts with '='; a leading '^'
// excludes the listed ports instead ("^=mlx5_1" and "=^mlx5_1" alike).
// An empty rule selects every port. The grammar is base/name_rule.h,
// which the settings check too, so a bad rule fails at init whether or not
// this build has the IB transport.
using HcaRule = NameRule;
// Returns false with `why` for a malformed rule (empty name, bad port).
bool parseHcaRule(const std::string& text, HcaRule* out, std::string* why);
bool hcaSelected(const HcaRule& rule, const std::string& device, int port);

// One entry of a port's GID table, as sysfs shows it.
struct GidEntry {
  int index = 0;
  uint8_t raw[16] = {0};
  std::string type;  // "RoCE v2", "IB/RoCE v1", or empty if unknown
};
// HOCCL_IB_GID_INDEX=-1 (auto): on InfiniBand index 0; on Ethernet a RoCE v2
// GID holding an IPv4 address (::ffff:a.b.c.d) if there is one, else a
// RoCE v2 GID that is not link-local, else any RoCE v2 GID, else the first
// non-zero entry. Returns -1 if the table has no usable entry.
int chooseGidIndex(const std::vector<GidEntry>& table, bool ethernet);
bool gidIsZero(const uint8_t raw[16]);
// "fe80::1" style text of a GID.
std::string gidText(const uint8_t raw[16]);

}  // namespace ibnet
}  // namespace hoccl
