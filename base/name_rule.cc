#include "base/name_rule.h"

#include <cctype>
#include <cstdlib>

namespace hoccl {

bool parseNameRule(const std::string& text, bool withPorts, NameRule* out, std::string* why) {
  *out = NameRule();
  size_t i = 0;
  for (; i < text.size() && (text[i] == '^' || text[i] == '='); ++i) {
    bool& flag = text[i] == '^' ? out->exclude : out->exact;
    if (flag) {
      *why = "\"" + text + "\" repeats '" + text[i] + "'";
      return false;
    }
    flag = true;
  }
  if (i == text.size()) {
    if (i == 0) return true;
    *why = "\"" + text + "\" lists no name";
    return false;
  }
  size_t start = i;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    NameRule::Entry e;
    size_t colon = withPorts ? item.find(':') : std::string::npos;
    e.name = item.substr(0, colon);
    if (e.name.empty()) {
      *why = "\"" + text + "\" has an empty name";
      return false;
    }
    for (char c : e.name) {
      if (isspace(static_cast<unsigned char>(c)) || iscntrl(static_cast<unsigned char>(c))) {
        *why = "\"" + e.name + "\" has a space or control character in the name";
        return false;
      }
    }
    if (colon != std::string::npos) {
      std::string port = item.substr(colon + 1);
      char* end = nullptr;
      long p = strtol(port.c_str(), &end, 10);
      if (port.empty() || !isdigit(static_cast<unsigned char>(port[0])) || *end != '\0' || p < 1 || p > 255) {
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

bool nameRuleSelects(const NameRule& rule, const std::string& name, int port) {
  if (rule.entries.empty()) return true;
  bool listed = false;
  for (const NameRule::Entry& e : rule.entries) {
    bool nameOk = rule.exact ? name == e.name : name.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || port < 0 || e.port == port)) listed = true;
  }
  return rule.exclude ? !listed : listed;
}

}  // namespace hoccl
