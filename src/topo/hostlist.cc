// Slurm hostlist expressions: "node[01-04,07],gpu1", "rack[1-2]-node[1-2]".
#include <cstdio>
#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

namespace {

constexpr size_t kMaxDigits = 18;  // fits in int64 without overflow

// One piece of an item: literal text, or a bracket group of alternatives.
struct Piece {
  std::vector<std::string> alternatives;  // one element for literal text
};

Status bad(const std::string& expr, const char* why, size_t pos) {
  return errorf(hocclInvalidArgument, "hostlist \"%s\": %s at character %zu", expr.c_str(), why, pos + 1);
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// Parses one number at expr[*i], advancing *i.
Status number(const std::string& expr, size_t* i, std::string* digits) {
  size_t start = *i;
  while (*i < expr.size() && isDigit(expr[*i])) ++*i;
  if (*i == start) return bad(expr, "expected a number inside '[...]'", start);
  if (*i - start > kMaxDigits) return bad(expr, "number too long", start);
  *digits = expr.substr(start, *i - start);
  return Status();
}

// Parses the group starting after '[' at expr[*i] up to and including ']'.
Status group(const std::string& expr, size_t* i, size_t budget, Piece* out, size_t maxNames) {
  size_t open = *i - 1;
  for (;;) {
    std::string lo, hi;
    if (*i >= expr.size()) return bad(expr, "unbalanced '['", open);
    HOCCL_TRY(number(expr, i, &lo));
    long long a = std::stoll(lo), b = a;
    if (*i < expr.size() && expr[*i] == '-') {
      ++*i;
      if (*i >= expr.size()) return bad(expr, "unbalanced '['", open);
      HOCCL_TRY(number(expr, i, &hi));
      b = std::stoll(hi);
      if (b < a) return bad(expr, "reversed range (high end below low end)", *i - hi.size());
    }
    if (static_cast<unsigned long long>(b - a) + out->alternatives.size() >= budget)
      return errorf(hocclInvalidArgument, "hostlist \"%s\": expands to more than %zu names", expr.c_str(), maxNames);
    // Zero padding: the width of the low end ("01-10" -> 01 ... 10).
    int width = static_cast<int>(lo.size());
    char buf[32];
    for (long long v = a; v <= b; ++v) {
      snprintf(buf, sizeof buf, "%0*lld", width, v);
      out->alternatives.emplace_back(buf);
    }
    if (*i >= expr.size()) return bad(expr, "unbalanced '['", open);
    char c = expr[*i];
    ++*i;
    if (c == ']') return Status();
    if (c != ',') return bad(expr, "expected ',', '-' or ']' inside '[...]'", *i - 1);
  }
}

}  // namespace

Status expandHostlist(const std::string& expr, std::vector<std::string>* out, size_t maxNames) {
  std::vector<std::string> names;
  size_t i = 0;
  while (i < expr.size()) {
    // One top-level item: text and bracket groups up to a ',' outside brackets.
    size_t itemStart = i;
    std::vector<Piece> pieces;
    std::string text;
    size_t count = 1;
    while (i < expr.size() && expr[i] != ',') {
      char c = expr[i];
      if (c == '[') {
        if (!text.empty()) pieces.push_back(Piece{{text}}), text.clear();
        ++i;
        Piece g;
        size_t budget = count ? (maxNames - names.size()) / count + 1 : maxNames;
        HOCCL_TRY(group(expr, &i, budget, &g, maxNames));
        count *= g.alternatives.size();
        if (names.size() + count > maxNames)
          return errorf(hocclInvalidArgument, "hostlist \"%s\": expands to more than %zu names", expr.c_str(),
                        maxNames);
        pieces.push_back(std::move(g));
      } else if (c == ']') {
        return bad(expr, "unbalanced ']'", i);
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        return bad(expr, "whitespace in a host name", i);
      } else {
        text.push_back(c);
        ++i;
      }
    }
    if (i == itemStart) return bad(expr, "empty name", i);
    if (names.size() + count > maxNames)
      return errorf(hocclInvalidArgument, "hostlist \"%s\": expands to more than %zu names", expr.c_str(), maxNames);
    if (!text.empty()) pieces.push_back(Piece{{text}});
    // Cartesian product, the first group varying slowest.
    std::vector<std::string> item{""};
    for (const Piece& p : pieces) {
      std::vector<std::string> next;
      next.reserve(item.size() * p.alternatives.size());
      for (const std::string& prefix : item)
        for (const std::string& alt : p.alternatives) next.push_back(prefix + alt);
      item.swap(next);
    }
    for (std::string& n : item) names.push_back(std::move(n));
    if (i < expr.size()) {  // the ','
      ++i;
      if (i == expr.size()) return bad(expr, "empty name after ','", i - 1);
    }
  }
  *out = std::move(names);
  return Status();
}

}  // namespace topo
}  // namespace hoccl
