// The grammar NCCL uses to pick devices and interfaces by name
// (NCCL_IB_HCA, NCCL_SOCKET_IFNAME), shared by the settings' validators and
// by the code that applies the rules, so both accept the same texts.
#pragma once

#include <string>
#include <vector>

namespace hoccl {

// "[^][=]name[:port],name[:port],...": names match as prefixes unless the
// list starts with '='; a leading '^' excludes the listed names instead
// ("^=x" and "=^x" alike). ":port" (1-255) exists only where the rule allows
// ports; elsewhere ':' is part of the name (interface aliases such as
// eth0:1). An empty rule selects everything.
struct NameRule {
  struct Entry {
    std::string name;
    int port = -1;  // -1: every port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;
};

// Returns false with `why` (quoting the offending part) for a malformed
// rule: no names after ^ or =, an empty name, a space in a name, a bad port.
bool parseNameRule(const std::string& text, bool withPorts, NameRule* out, std::string* why);
// True if the rule selects `name` (and `port`; -1 matches any entry).
bool nameRuleSelects(const NameRule& rule, const std::string& name, int port = -1);

}  // namespace hoccl
