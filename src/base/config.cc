#include "src/base/config.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/log.h"
#include "src/base/name_rule.h"

namespace hoccl {
namespace {

bool parseDouble(const std::string& v, double* out) {
  char* end = nullptr;
  errno = 0;
  double d = strtod(v.c_str(), &end);
  if (errno != 0 || end == v.c_str() || *end != '\0') return false;
  *out = d;
  return true;
}

bool parseInt(const std::string& v, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long x = strtoll(v.c_str(), &end, 0);
  if (errno != 0 || end == v.c_str()) return false;
  // Accept K/M/G suffixes (powers of 1024).
  if (*end == 'K' || *end == 'k') { x <<= 10; ++end; }
  else if (*end == 'M' || *end == 'm') { x <<= 20; ++end; }
  else if (*end == 'G' || *end == 'g') { x <<= 30; ++end; }
  if (*end != '\0') return false;
  *out = x;
  return true;
}

std::string positiveSeconds(const std::string& v) {
  double d;
  if (!parseDouble(v, &d) || !(d > 0) || d > 1e7) return "a number of seconds > 0";
  return "";
}

std::string sliceBytesRange(const std::string& v) {
  long long x;
  if (!parseInt(v, &x) || x < 4096 || x > (64ll << 20) || (x % 64) != 0)
    return "a byte count from 4096 to 64M, a multiple of 64 (K/M suffixes allowed)";
  return "";
}

std::string slotsRange(const std::string& v) {
  long long x;
  if (!parseInt(v, &x) || x < 2 || x > 64) return "an integer from 2 to 64";
  return "";
}

std::string channelsRange(const std::string& v) {
  long long x;
  if (strcasecmp(v.c_str(), "auto") == 0) return "";
  if (!parseInt(v, &x) || x < 1 || x > 32) return "auto or an integer from 1 to 32";
  return "";
}

std::string spinRange(const std::string& v) {
  long long x;
  if (!parseInt(v, &x) || x < -1 || x > 100000000) return "-1 (automatic) or an iteration count >= 0";
  return "";
}

std::string streamsRange(const std::string& v) {
  long long x;
  if (!parseInt(v, &x) || x < 1 || x > 16) return "an integer from 1 to 16";
  return "";
}

std::string netMode(const std::string& v) {
  if (v == "auto" || v == "ib" || v == "socket") return "";
  return "auto, ib or socket";
}

// An integer in [lo, hi] for the HOCCL_IB_* settings.
template <long long lo, long long hi>
std::string intRange(const std::string& v) {
  long long x;
  if (!parseInt(v, &x) || x < lo || x > hi) return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  return "";
}

std::string retriesRange(const std::string& v) {
  long long x;
  if (!parseInt(v, &x) || x < 0 || x > 1000000) return "an integer >= 0";
  return "";
}

std::string directRange(const std::string& v) {
  long long x;
  if (!parseInt(v, &x) || x < 0 || x > (1ll << 30)) return "a byte count >= 0 (K/M suffixes allowed; 0 = off)";
  return "";
}

std::string boolValue(const std::string& v) {
  if (v == "0" || v == "1") return "";
  return "0 or 1";
}

std::string debugLevel(const std::string& v) {
  static const char* levels[] = {"NONE", "VERSION", "WARN", "INFO", "TRACE"};
  for (const char* l : levels)
    if (strcasecmp(v.c_str(), l) == 0) return "";
  return "one of NONE, VERSION, WARN, INFO, TRACE";
}

std::string algoName(const std::string& v) {
  static const char* names[] = {"auto", "ring", "hierarchical", "horing", "doubling"};
  for (const char* n : names)
    if (strcasecmp(v.c_str(), n) == 0) return "";
  return "one of auto, ring, hierarchical, horing, doubling";
}

std::string isaName(const std::string& v) {
  static const char* names[] = {"auto", "scalar", "avx2", "avx512"};
  for (const char* n : names)
    if (strcasecmp(v.c_str(), n) == 0) return "";
  return "one of auto, scalar, avx2, avx512";
}

std::string hostPort(const std::string& v) {
  if (v.empty()) return "";
  size_t colon = v.rfind(':');
  long long port;
  if (colon == std::string::npos || colon == 0 || !parseInt(v.substr(colon + 1), &port) ||
      port < 1 || port > 65535)
    return "host:port (port 1-65535)";
  return "";
}

// HOCCL_IB_HCA: the grammar the IB transport applies (src/base/name_rule.h),
// checked here so that a bad rule fails init even in a build without IB.
std::string hcaRule(const std::string& v) {
  NameRule rule;
  std::string why;
  if (parseNameRule(v, /*withPorts=*/true, &rule, &why)) return "";
  return "[^][=]name[:port],... as NCCL_IB_HCA (" + why + ")";
}

std::string ifnameRule(const std::string& v) {
  NameRule rule;
  std::string why;
  if (parseNameRule(v, /*withPorts=*/false, &rule, &why)) return "";
  return "[^][=]name,... as NCCL_SOCKET_IFNAME (" + why + ")";
}

std::string debugSubsys(const std::string& v) { return checkLogSubsystems(v); }

std::string debugFile(const std::string& v) { return checkLogFilePattern(v); }

// The bootstrap carries the host id in 128 bytes (BootInfo::hostId); a
// longer one would be cut, and ranks would disagree about who shares a node.
std::string hostIdText(const std::string& v) {
  if (v.size() > 127) return "at most 127 characters";
  for (char c : v)
    if (iscntrl(static_cast<unsigned char>(c))) return "printable characters";
  return "";
}

// A file every rank reads at init: checked now, so the error names the
// setting before anything else runs.
std::string readableFile(const std::string& v) {
  if (v.empty()) return "";
  struct stat st;
  if (stat(v.c_str(), &st) != 0 || access(v.c_str(), R_OK) != 0)
    return std::string("a readable file (") + strerror(errno) + ")";
  if (S_ISDIR(st.st_mode)) return "a readable file, not a directory";
  return "";
}

// A file rank 0 writes; whether it can be created is only known then.
std::string writableFileName(const std::string& v) {
  struct stat st;
  if (!v.empty() && (v.back() == '/' || (stat(v.c_str(), &st) == 0 && S_ISDIR(st.st_mode))))
    return "a file name, not a directory";
  return "";
}

const std::vector<SettingDecl> kSettings = {
    {"HOCCL_DEBUG", "NONE", "Log level: NONE, VERSION, WARN, INFO or TRACE.", debugLevel, false},
    {"HOCCL_DEBUG_SUBSYS", "ALL",
     "Comma-separated subsystems to log (INIT, COLL, BOOTSTRAP, SHM, NET, TUNE, ENV, ALL); a "
     "leading ^ excludes the listed ones.",
     debugSubsys, false},
    {"HOCCL_DEBUG_FILE", "",
     "Write the log to this file instead of stderr; %h expands to the host name, %p to the pid, %% to %.",
     debugFile, false},
    {"HOCCL_TIMEOUT", "300",
     "Seconds any wait (bootstrap, connection, a collective making no progress) may last before "
     "it becomes an error.",
     positiveSeconds, false},
    {"HOCCL_COMM_ID", "",
     "host:port of the rendezvous: rank 0 listens there, the others connect; replaces passing a "
     "unique id.",
     hostPort, false},
    {"HOCCL_HOSTID", "",
     "Node identity; ranks with equal ids share memory. Default: host name + boot id. Set it to "
     "make one machine act as several nodes.",
     hostIdText, false},
    {"HOCCL_SOCKET_IFNAME", "",
     "Network interface for the bootstrap and TCP connections: a prefix list (eth,ib), ^ to "
     "exclude, = for exact names. Unset: each rank uses the interface the kernel routes to the "
     "rendezvous; hocclGetUniqueId serves the rendezvous on the first interface that is up and "
     "not loopback (nor docker*, virbr*), else on loopback.",
     ifnameRule, false},
    {"HOCCL_TOPO_FILE", "",
     "Topology file: switch groups and overrides of what is discovered (docs/topology-file.md); a "
     "name ending in .conf is read as a Slurm topology.conf.",
     readableFile, false},
    {"HOCCL_TOPO_DUMP_FILE", "", "Rank 0 writes the whole system here, in the topology file format.", writableFileName,
     false},
    {"HOCCL_SOCKET_NSTREAMS", "1",
     "TCP streams per network connection (1-16); large messages are split across them. One is the default: "
     "HO-Ring's rails already run many connections at once, and extra streams over a shaped or shared link "
     "lose to each other.", streamsRange, false},
    {"HOCCL_NET", "auto",
     "Network between nodes: ib (verbs; fail if unavailable), socket (TCP), or auto: IB when an active "
     "port exists, else TCP with an INFO line saying why. Set it alike on every rank.",
     netMode, false},
    {"HOCCL_IB_HCA", "",
     "IB ports to use, as NCCL_IB_HCA: mlx5_0:1,mlx5_1 (name prefixes, optional :port from 1 to 255); a leading = for "
     "exact names, ^ to exclude. Default: every active port.",
     hcaRule, false},
    {"HOCCL_IB_GID_INDEX", "-1",
     "GID index for RoCE; -1 picks one: RoCE v2 with an IPv4 address first, else the best that exists.",
     intRange<-1, 255>, false},
    {"HOCCL_IB_QPS_PER_CONN", "1",
     "Queue pairs per IB connection (1-16); messages of 64 KiB and more are split across them.",
     intRange<1, 16>, false},
    {"HOCCL_IB_TIMEOUT", "20", "IB ack timeout exponent: 4.096 us x 2^value per retry (1-31).",
     intRange<1, 31>, false},
    {"HOCCL_IB_RETRY_CNT", "7", "IB retransmissions before a connection fails (0-7).", intRange<0, 7>, false},
    {"HOCCL_CONNECT_RETRIES", "50",
     "Times a bootstrap connection is retried (with back-off) before giving up.", retriesRange,
     false},
    {"HOCCL_SLICE_BYTES", "128K",
     "Bytes per pipeline slice (and per shared-memory slot).", sliceBytesRange, true},
    {"HOCCL_SLOTS", "8", "Slots per connection: slices in flight between two ranks.", slotsRange,
     true},
    {"HOCCL_NCHANNELS", "auto", "Channels (independent rings over disjoint parts of the data): auto lets the "
     "tuner pick 1 to 4 per call, a number fixes it.",
     channelsRange, true},
    {"HOCCL_ALGO", "auto", "Algorithm: auto (the cost model picks per collective and size), or force ring, "
     "hierarchical, horing or doubling (all-reduce only). hierarchical and horing group ranks by node and switch; "
     "where the forced algorithm lacks a collective the ring runs.", algoName, true},
    {"HOCCL_TUNE_FILE", "", "Tune file: link latencies and speeds for the cost model, and rules "
     "'<collective> <lo>-<hi> <algorithm> [channels=N] [chunks=K]' that win over it (docs/algorithms.md). "
     "Every rank must read the same file.", readableFile, false},
    {"HOCCL_SPIN", "-1",
     "Polls before a waiting rank sleeps; -1 picks a value from the number of local ranks and "
     "cores.",
     spinRange, false},
    {"HOCCL_CHECK_CALLS", "1",
     "1: every message carries the collective's signature, so calls that differ across ranks "
     "are reported instead of corrupting data.",
     boolValue, true},
    {"HOCCL_DIRECT_BYTES", "32K",
     "Slices of at least this many bytes travel by reference between ranks of one process (and of "
     "one node with HOCCL_CMA=1): the receiver copies them once from the sender's buffer. 0 turns "
     "it off.",
     directRange, false},
    {"HOCCL_CMA", "0",
     "1: processes on one node read each other's buffers with process_vm_readv for slices sent by "
     "reference. Off by default: slower than copies through shared memory on 2-core VMs.",
     boolValue, false},
    {"HOCCL_ISA", "auto", "Force the data-op instruction set: auto, scalar, avx2, avx512.", isaName,
     false},
    {"HOCCL_TUNER_RULES", "",
     "NCCL tuner plugin: a rule file in the CSV format of NCCL's example tuner; its rules win over "
     "the model. Unset: NCCL_TUNER_CONFIG_FILE if set, else none (docs/nccl-plugins.md).",
     readableFile, false},
};

}  // namespace

const std::vector<SettingDecl>& allSettings() { return kSettings; }

std::string settingValue(const char* name) {
  for (const SettingDecl& d : kSettings) {
    if (strcmp(d.name, name) != 0) continue;
    const char* env = getenv(name);
    return (env && *env) ? std::string(env) : std::string(d.defaultValue);
  }
  fprintf(stderr, "hoccl: internal error: undeclared setting %s\n", name);
  abort();
}

bool loadSettings(Settings* out, std::string* error) {
  for (const SettingDecl& d : kSettings) {
    std::string v = settingValue(d.name);
    std::string why = d.validate(v);
    if (!why.empty()) {
      *error = std::string(d.name) + "=\"" + v + "\" is invalid: expected " + why;
      return false;
    }
  }
  Settings s;
  long long x;
  parseDouble(settingValue("HOCCL_TIMEOUT"), &s.timeoutSec);
  parseInt(settingValue("HOCCL_SLICE_BYTES"), &x);
  s.sliceBytes = static_cast<uint64_t>(x);
  parseInt(settingValue("HOCCL_SLOTS"), &x);
  s.slots = static_cast<int>(x);
  const std::string nch = settingValue("HOCCL_NCHANNELS");
  x = 0;
  if (strcasecmp(nch.c_str(), "auto") != 0) parseInt(nch, &x);
  s.nchannels = static_cast<int>(x);  // 0: auto
  parseInt(settingValue("HOCCL_SPIN"), &x);
  s.spinIters = static_cast<int>(x);
  parseInt(settingValue("HOCCL_SOCKET_NSTREAMS"), &x);
  s.socketStreams = static_cast<int>(x);
  s.net = settingValue("HOCCL_NET");
  s.ibHca = settingValue("HOCCL_IB_HCA");
  parseInt(settingValue("HOCCL_IB_GID_INDEX"), &x);
  s.ibGidIndex = static_cast<int>(x);
  parseInt(settingValue("HOCCL_IB_QPS_PER_CONN"), &x);
  s.ibQpsPerConn = static_cast<int>(x);
  parseInt(settingValue("HOCCL_IB_TIMEOUT"), &x);
  s.ibTimeout = static_cast<int>(x);
  parseInt(settingValue("HOCCL_IB_RETRY_CNT"), &x);
  s.ibRetryCnt = static_cast<int>(x);
  parseInt(settingValue("HOCCL_CONNECT_RETRIES"), &x);
  s.connectRetries = static_cast<int>(x);
  s.algo = settingValue("HOCCL_ALGO");
  for (char& c : s.algo) c = static_cast<char>(tolower(c));
  s.hostId = settingValue("HOCCL_HOSTID");
  s.commId = settingValue("HOCCL_COMM_ID");
  s.socketIfname = settingValue("HOCCL_SOCKET_IFNAME");
  s.topoFile = settingValue("HOCCL_TOPO_FILE");
  s.topoDumpFile = settingValue("HOCCL_TOPO_DUMP_FILE");
  s.tuneFile = settingValue("HOCCL_TUNE_FILE");
  s.checkCalls = settingValue("HOCCL_CHECK_CALLS") == "1";
  s.crossMemoryAttach = settingValue("HOCCL_CMA") == "1";
  parseInt(settingValue("HOCCL_DIRECT_BYTES"), &x);
  s.directBytes = static_cast<uint64_t>(x);
  *out = s;
  return true;
}

std::string Settings::fingerprint() const {
  char buf[256];
  snprintf(buf, sizeof buf,
           "HOCCL_SLICE_BYTES=%llu\nHOCCL_SLOTS=%d\nHOCCL_NCHANNELS=%d\nHOCCL_ALGO=%s\n"
           "HOCCL_CHECK_CALLS=%d\n",
           static_cast<unsigned long long>(sliceBytes), slots, nchannels, algo.c_str(),
           checkCalls ? 1 : 0);
  return buf;
}

}  // namespace hoccl
