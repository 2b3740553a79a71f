// The tune file parser (format in tuner.h and docs/algorithms.md). It
// reads outside data: every field is checked, every error names the file,
// the line and what was expected, and nothing is read past the text.
#include <cctype>
#include <cstdio>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/regular_file.h"
#include "src/tune/tuner.h"

namespace hoccl {
namespace tune {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool parseCollective(std::string s, CollKind* out) {
  s = lower(s);
  std::string t;
  for (char c : s)
    if (c != '_' && c != '-') t += c;
  if (t == "allreduce") *out = CollKind::AllReduce;
  else if (t == "reducescatter") *out = CollKind::ReduceScatter;
  else if (t == "allgather") *out = CollKind::AllGather;
  else if (t == "broadcast") *out = CollKind::Broadcast;
  else if (t == "reduce") *out = CollKind::Reduce;
  else return false;
  return true;
}

bool parseNumber(const std::string& s, double lo, double hi, double* out) {
  if (s.empty() || s.size() > 32) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parseCount(const std::string& s, int lo, int hi, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  const long v = std::strtol(s.c_str(), nullptr, 10);
  if (v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// A word from the file as it may appear in a message: printable, short.
std::string shown(const std::string& w) {
  std::string out;
  for (size_t i = 0; i < w.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(w[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (w.size() > 40) out += "...";
  return out;
}

}  // namespace

bool parseSize(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 24) return false;
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0 || digits > 19) return false;
  uint64_t v = std::strtoull(s.substr(0, digits).c_str(), nullptr, 10);
  const std::string suffix = lower(s.substr(digits));
  int shift = 0;
  if (suffix == "" || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib") shift = 10;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib") shift = 20;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib") shift = 30;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib") shift = 40;
  else return false;
  if (shift && v > (UINT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

std::string sizeText(uint64_t b) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + units[u];
}

Status parseTuneFile(const std::string& text, const std::string& path, const LinkModel& base, TuneFile* out) {
  TuneFile f;
  f.path = path;
  f.links = base;
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  auto fail = [&](const std::string& what) {
    return Status(hocclInvalidArgument, path + ":" + std::to_string(lineNo) + ": " + what);
  };
  while (std::getline(in, line)) {
    ++lineNo;
    if (lineNo > 100000) return fail("too many lines (the limit is 100000)");
    if (line.find('\0') != std::string::npos) return fail("NUL byte in the file");
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) {
      if (w.size() >= 16) return fail("too many fields");
      w.push_back(x);
    }
    if (w.empty()) continue;
    const std::string head = lower(w[0]);
    if (head == "link") {
      if (w.size() < 3) return fail("expected 'link shm|net|spine latency_us=X gbps=Y'");
      const std::string cls = lower(w[1]);
      LinkParams* lp = cls == "shm" ? &f.links.shm : cls == "net" ? &f.links.net : cls == "spine" ? &f.links.spine : nullptr;
      if (!lp) return fail("unknown link class '" + shown(w[1]) + "' (expected shm, net or spine)");
      for (size_t i = 2; i < w.size(); ++i) {
        const size_t eq = w[i].find('=');
        const std::string k = lower(w[i].substr(0, eq)), v = eq == std::string::npos ? "" : w[i].substr(eq + 1);
        double x = 0;
        if (k == "latency_us" && parseNumber(v, 0, 1e7, &x)) lp->latencyUs = x;
        else if (k == "gbps" && parseNumber(v, 0, 1e6, &x)) lp->gbps = x;
        else if (k == "burst_kb" && parseNumber(v, 0, 1e9, &x)) lp->burstKB = x;
        else if (k == "buffer_kb" && parseNumber(v, 0, 1e9, &x)) lp->bufferKB = x;
        else
          return fail("bad '" + shown(w[i]) +
                      "' (expected latency_us=<0..1e7>, gbps=<0..1e6>, burst_kb=<0..1e9> or buffer_kb=<0..1e9>)");
      }
    } else if (head == "set") {
      if (w.size() < 2) return fail("expected 'set name=value'");
      for (size_t i = 1; i < w.size(); ++i) {
        const size_t eq = w[i].find('=');
        const std::string k = lower(w[i].substr(0, eq)), v = eq == std::string::npos ? "" : w[i].substr(eq + 1);
        double x = 0;
        if (!parseNumber(v, 0, 1e6, &x)) return fail("bad value in '" + shown(w[i]) + "' (expected a number from 0 to 1e6)");
        if (k == "node_mem_gbps" && x > 0) f.links.nodeMemGbps = x;
        else if (k == "reduce_gbps" && x > 0) f.links.reduceGbps = x;
        else if (k == "reduce_mem_ratio" && x > 0) f.links.reduceMemRatio = x;
        else if (k == "flow_gbps") f.links.flowGbps = x;
        else if (k == "msg_cpu_us") f.links.msgCpuUs = x;
        else if (k == "net_msg_cpu_us") f.links.netMsgCpuUs = x;
        else if (k == "local_msg_cpu_us") f.links.localMsgCpuUs = x;
        else if (k == "device_gpu_gbps" && x > 0) f.links.device.gpu.gbps = x;
        else if (k == "device_gpu_step_us") f.links.device.gpu.latencyUs = x;
        else if (k == "device_reduce_gbps" && x > 0) f.links.device.reduceGbps = x;
        else if (k == "device_mem_gbps" && x > 0) f.links.device.memGbps = x;
        else if (k == "device_proxy_us") f.links.device.proxyUs = x;
        else if (k == "device_pcie_gbps" && x > 0) f.links.device.pcieGbps = x;
        else if (k == "device_copy_us") f.links.device.copyUs = x;
        else
          return fail("unknown setting '" + shown(k) +
                      "' (expected node_mem_gbps, reduce_gbps, reduce_mem_ratio, flow_gbps, msg_cpu_us, "
                      "net_msg_cpu_us, local_msg_cpu_us, device_gpu_gbps, device_gpu_step_us, device_reduce_gbps, "
                      "device_mem_gbps, device_proxy_us, device_pcie_gbps or device_copy_us; the rates > 0)");
      }
    } else {
      TuneRule r;
      r.line = lineNo;
      if (!parseCollective(w[0], &r.coll))
        return fail("unknown collective or keyword '" + shown(w[0]) +
                    "' (expected link, set, allreduce, reducescatter, allgather, broadcast or reduce)");
      if (w.size() < 3) return fail("expected '<collective> <lo>-<hi>|* <algorithm> [channels=N] [chunks=K]'");
      if (w[1] != "*") {
        const size_t dash = w[1].find('-');
        if (dash == std::string::npos) return fail("bad size range '" + shown(w[1]) + "' (expected lo-hi, lo- or *)");
        const std::string lo = w[1].substr(0, dash), hi = w[1].substr(dash + 1);
        if (!parseSize(lo, &r.lo)) return fail("bad size '" + shown(lo) + "' (expected bytes with an optional K, M, G suffix)");
        if (!hi.empty() && !parseSize(hi, &r.hi))
          return fail("bad size '" + shown(hi) + "' (expected bytes with an optional K, M, G suffix)");
        if (r.hi <= r.lo) return fail("empty size range '" + shown(w[1]) + "' (hi must be above lo)");
      }
      const AlgoInfo* a = findAlgorithm(w[2].c_str());
      if (!a) {
        std::string names;
        for (const AlgoInfo& x : allAlgorithms()) names += std::string(names.empty() ? "" : ", ") + x.name;
        return fail("unknown algorithm '" + shown(w[2]) + "' (expected " + names + ")");
      }
      if (!a->supports(r.coll))
        return fail(std::string("algorithm ") + a->name + " has no " + collName(r.coll));
      r.algo = a->id;
      for (size_t i = 3; i < w.size(); ++i) {
        const size_t eq = w[i].find('=');
        const std::string k = lower(w[i].substr(0, eq)), v = eq == std::string::npos ? "" : w[i].substr(eq + 1);
        if (k == "channels" && parseCount(v, 1, 32, &r.channels)) continue;
        if (k == "chunks" && parseCount(v, 1, 64, &r.chunks)) continue;
        return fail("bad option '" + shown(w[i]) + "' (expected channels=<1..32> or chunks=<1..64>)");
      }
      f.rules.push_back(r);
    }
  }
  *out = std::move(f);
  return Status();
}

Status loadTuneFile(const std::string& path, const LinkModel& base, TuneFile* out) {
  std::string text;
  HOCCL_TRY(readRegularFile(path, size_t(16) << 20, &text).context("tune file"));
  return parseTuneFile(text, path, base, out);
}

}  // namespace tune
}  // namespace hoccl
