// Slurm topology.conf (the tree plugin's format) -> TopoOverrides.
//   SwitchName=leaf1 Nodes=node[01-16] LinkSpeed=200
//   SwitchName=spine Switches=leaf[1-2]
// Keys are case-insensitive, '#' starts a comment, a trailing '\' joins the
// next line. Slurm's LinkSpeed is an opaque number; we read it as Gbit/s.
#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

namespace {


struct Line {
  int number;        // first physical line
  std::string text;  // continuation lines joined, comments removed
};

Status lineError(const std::string& path, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
Status lineError(const std::string& path, int line, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return errorf(hocclInvalidArgument, "Slurm topology file %s, line %d: %s", path.c_str(), line, buf);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

void rtrim(std::string* s) {
  while (!s->empty() && isspace(static_cast<unsigned char>(s->back()))) s->pop_back();
}

Status logicalLines(const std::string& text, const std::string& path, std::vector<Line>* out) {
  int number = 0;
  size_t pos = 0;
  Line cur{0, ""};
  bool continuing = false;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string phys = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    size_t hash = phys.find('#');
    if (hash != std::string::npos) phys.resize(hash);
    rtrim(&phys);
    bool more = !phys.empty() && phys.back() == '\\';
    if (more) phys.pop_back();
    if (!continuing) cur = Line{number, ""};
    cur.text += " " + phys;
    continuing = more;
    if (!continuing) out->push_back(cur);
  }
  if (continuing) return lineError(path, cur.number, "the last line ends with '\\' (continuation of nothing)");
  return Status();
}

struct Entry {
  int line;
  bool haveNodes = false, haveSwitches = false;
};

}  // namespace

Status parseSlurmTopology(const std::string& text, const std::string& path, TopoOverrides* out,
                          const ParseLimits& limits) {
  std::vector<Line> lines;
  HOCCL_TRY(logicalLines(text, path, &lines));
  TopoOverrides o;
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;
  size_t totalNames = 0;
  for (const Line& l : lines) {
    std::vector<std::string> tokens;
    size_t i = 0;
    while (i < l.text.size()) {
      while (i < l.text.size() && isspace(static_cast<unsigned char>(l.text[i]))) ++i;
      size_t start = i;
      while (i < l.text.size() && !isspace(static_cast<unsigned char>(l.text[i]))) ++i;
      if (i > start) tokens.push_back(l.text.substr(start, i - start));
    }
    if (tokens.empty()) continue;
    SwitchInfo s;
    Entry e{l.number};
    std::map<std::string, bool> seen;
    bool haveName = false;
    for (const std::string& t : tokens) {
      size_t eq = t.find('=');
      if (eq == std::string::npos || eq == 0)
        return lineError(path, l.number, "expected KEY=VALUE, found \"%s\"", t.c_str());
      std::string key = lower(t.substr(0, eq)), value = t.substr(eq + 1);
      if (seen[key]) return lineError(path, l.number, "%s is given twice", t.substr(0, eq).c_str());
      seen[key] = true;
      if (value.empty()) return lineError(path, l.number, "%s has no value", t.substr(0, eq).c_str());
      if (key == "switchname") {
        s.name = value;
        haveName = true;
      } else if (key == "nodes" || key == "switches") {
        std::vector<std::string> names;
        Status st = expandHostlist(value, &names, limits.namesPerHostlist);
        if (!st.ok()) return lineError(path, l.number, "%s", st.message().c_str());
        totalNames += names.size();
        if (totalNames > limits.namesPerFile)
          return lineError(path, l.number, "the file's hostlists expand to more than %zu names in all", limits.namesPerFile);
        (key == "nodes" ? s.nodes : s.children) = std::move(names);
        (key == "nodes" ? e.haveNodes : e.haveSwitches) = true;
      } else if (key == "linkspeed") {
        errno = 0;
        char* end = nullptr;
        double v = strtod(value.c_str(), &end);
        if (errno || !end || *end || !(v >= 0) || v > 1e9)
          return lineError(path, l.number, "LinkSpeed must be a non-negative number (read as Gbit/s), not \"%s\"",
                           value.c_str());
        s.linkGbps = v;
      } else {
        return lineError(path, l.number,
                         "unknown key \"%s\" (known: SwitchName, Nodes, Switches, LinkSpeed; only the tree "
                         "topology format is supported)",
                         t.substr(0, eq).c_str());
      }
    }
    if (!haveName) return lineError(path, l.number, "no SwitchName= on this line");
    auto [it, fresh] = index.emplace(s.name, o.switches.size());
    if (!fresh)
      return lineError(path, l.number, "switch \"%s\" is defined twice (first at line %d)", s.name.c_str(),
                       entries[it->second].line);
    o.switches.push_back(std::move(s));
    entries.push_back(e);
  }

  // References between switches: every child defined, one parent each, no cycle.
  for (size_t i = 0; i < o.switches.size(); ++i) {
    for (const std::string& c : o.switches[i].children) {
      auto it = index.find(c);
      if (it == index.end())
        return lineError(path, entries[i].line, "switch \"%s\" is not defined (Switches= of \"%s\")", c.c_str(),
                         o.switches[i].name.c_str());
      SwitchInfo& child = o.switches[it->second];
      if (it->second == i) return lineError(path, entries[i].line, "switch \"%s\" lists itself", c.c_str());
      if (!child.parent.empty() && child.parent != o.switches[i].name)
        return lineError(path, entries[i].line, "switch \"%s\" is already under \"%s\" (line %d)", c.c_str(),
                         child.parent.c_str(), entries[index[child.parent]].line);
      child.parent = o.switches[i].name;
      // LinkSpeed on an upper switch is the speed of the links below it.
      if (child.uplinkGbps == 0) child.uplinkGbps = o.switches[i].linkGbps;
    }
  }
  for (size_t i = 0; i < o.switches.size(); ++i) {
    size_t cur = i;
    std::string chain = o.switches[i].name;
    for (size_t steps = 0; !o.switches[cur].parent.empty(); ++steps) {
      cur = index[o.switches[cur].parent];
      chain += " -> " + o.switches[cur].name;
      if (cur == i || steps > o.switches.size())
        return lineError(path, entries[i].line, "switches form a cycle: %s", chain.c_str());
    }
  }
  std::map<std::string, size_t> under;
  for (size_t i = 0; i < o.switches.size(); ++i) {
    for (const std::string& n : o.switches[i].nodes) {
      auto [it, fresh] = under.emplace(n, i);
      if (!fresh && it->second != i)
        return lineError(path, entries[i].line, "node \"%s\" is listed under two switches: \"%s\" (line %d) and \"%s\"",
                         n.c_str(), o.switches[it->second].name.c_str(), entries[it->second].line,
                         o.switches[i].name.c_str());
    }
  }
  *out = std::move(o);
  return Status();
}

}  // namespace topo
}  // namespace hoccl
