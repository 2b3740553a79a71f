// The settings table: one row per setting, and the typed parsers the rows
// use. Declaring a setting is one row here plus its field in Settings
// (config.h); the snapshot, the fingerprint and hoccl-info follow.
#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "base/name_rule.h"
#include "base/regular_file.h"

namespace hoccl {
namespace {

// ---- Text to numbers -------------------------------------------------------

bool parseDouble(const std::string& v, double* out) {
  char* end = nullptr;
  errno = 0;
  double d = strtod(v.c_str(), &end);
  if (errno != 0 || end == v.c_str() || *end != '\0') return false;
  *out = d;
  return true;
}

// An integer, with an optional K/M/G suffix (powers of 1024). A value
// whose multiple does not fit is refused, not wrapped (18014398509482112K
// once wrapped to 128K and passed the range checks).
bool parseInt(const std::string& v, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long x = strtoll(v.c_str(), &end, 0);
  if (errno != 0 || end == v.c_str()) return false;
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  else if (*end == 'M' || *end == 'm') shift = 20;
  else if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) ++end;
  if (*end != '\0') return false;
  if (x > (LLONG_MAX >> shift) || x < (LLONG_MIN >> shift)) return false;
  *out = x * (1ll << shift);
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---- Typed fields ----------------------------------------------------------
// A parser turns a row's text into a value of its field's type, or returns
// what the setting expects. field() binds one to a member of Settings.

template <class T>
using Parser = std::function<std::string(const std::string& text, T* out)>;

std::string showValue(int v) { return std::to_string(v); }
std::string showValue(uint64_t v) { return std::to_string(v); }
std::string showValue(bool v) { return v ? "1" : "0"; }
std::string showValue(const std::string& v) { return v; }
std::string showValue(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

template <class T>
SettingField field(T Settings::*member, Parser<T> parse, std::function<std::string(const T&)> show) {
  SettingField f;
  f.parse = [member, parse](const std::string& text, Settings* out) {
    T value{};
    std::string why = parse(text, &value);
    if (why.empty()) out->*member = std::move(value);
    return why;
  };
  f.show = [member, show](const Settings& s) { return show(s.*member); };
  return f;
}

template <class T>
SettingField field(T Settings::*member, Parser<T> parse) {
  return field<T>(member, std::move(parse), [](const T& v) { return showValue(v); });
}

// An integer in [lo, hi] (K/M/G suffixes allowed).
template <class T>
Parser<T> integerIn(long long lo, long long hi, std::string expected = "") {
  if (expected.empty()) expected = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  return [lo, hi, expected](const std::string& v, T* out) -> std::string {
    long long x;
    if (!parseInt(v, &x) || x < lo || x > hi) return expected;
    *out = static_cast<T>(x);
    return "";
  };
}

// HOCCL_NCHANNELS: "auto" (stored as 0) or what `number` accepts.
Parser<int> autoOr(Parser<int> number, std::string expected) {
  return [number, expected](const std::string& v, int* out) -> std::string {
    if (strcasecmp(v.c_str(), "auto") == 0) {
      *out = 0;
      return "";
    }
    return number(v, out).empty() ? "" : expected;
  };
}

std::string showAuto(const int& n) { return n == 0 ? "auto" : std::to_string(n); }

// A timeout: at least 1 ms (a smaller one, 1e-300 say, is a mistake: every
// wait would fail at once) and at most 10^7 s (about 116 days); NaN and
// infinities are refused with the rest.
Parser<double> positiveSeconds() {
  return [](const std::string& v, double* out) -> std::string {
    double d;
    if (!parseDouble(v, &d) || !(d >= 1e-3 && d <= 1e7)) return "a number of seconds from 0.001 to 10000000";
    *out = d;
    return "";
  };
}

// A duration in seconds from `lo` to `hi`, or 0 where zeroTurnsOff.
Parser<double> secondsIn(double lo, double hi, bool zeroTurnsOff) {
  char expected[96];
  snprintf(expected, sizeof expected, "%sa number of seconds from %g to %g", zeroTurnsOff ? "0 (off) or " : "", lo, hi);
  return [=, expected = std::string(expected)](const std::string& v, double* out) -> std::string {
    double d;
    if (!parseDouble(v, &d) || !((d >= lo && d <= hi) || (zeroTurnsOff && d == 0))) return expected;
    *out = d;
    return "";
  };
}

// A duration in microseconds: 0 to 10^7 (10 s).
Parser<double> microseconds() {
  return [](const std::string& v, double* out) -> std::string {
    double d;
    if (!parseDouble(v, &d) || !(d >= 0 && d <= 1e7)) return "a number of microseconds from 0 to 10000000";
    *out = d;
    return "";
  };
}

Parser<bool> zeroOrOne() {
  return [](const std::string& v, bool* out) -> std::string {
    if (v != "0" && v != "1") return "0 or 1";
    *out = v == "1";
    return "";
  };
}

// One of a fixed list, ignoring case; stored in lower case.
Parser<std::string> oneOf(std::vector<std::string> choices) {
  return [choices](const std::string& v, std::string* out) -> std::string {
    std::string why = expectOneOf(v, choices);
    if (why.empty()) *out = lower(v);
    return why;
  };
}

// Text whose form `check` knows; stored as given.
Parser<std::string> textWhere(std::string (*check)(const std::string&)) {
  return [check](const std::string& v, std::string* out) -> std::string {
    std::string why = check(v);
    if (why.empty()) *out = v;
    return why;
  };
}

// ---- Checks of text settings -------------------------------------------------

std::string hostPort(const std::string& v) {
  if (v.empty()) return "";
  size_t colon = v.rfind(':');
  long long port;
  if (colon == std::string::npos || colon == 0 || !parseInt(v.substr(colon + 1), &port) || port < 1 ||
      port > 65535)
    return "host:port (port 1-65535)";
  return "";
}

// HOCCL_IB_HCA: the grammar the IB transport applies (base/name_rule.h),
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

// The bootstrap carries the host id in 128 bytes (BootInfo::hostId); a
// longer one would be cut, and ranks would disagree about who shares a node.
std::string hostIdText(const std::string& v) {
  if (v.size() > 127) return "at most 127 characters";
  for (char c : v)
    if (iscntrl(static_cast<unsigned char>(c))) return "printable characters";
  return "";
}

// The form of an algorithm name; which names exist is the registry's to say
// (expectOneOf, called by the communicator). 31 characters: hocclCommSplit
// exchanges the name in 32 bytes.
std::string algorithmNameForm(const std::string& v) {
  bool ok = !v.empty() && v.size() <= 31;
  for (char c : v) ok = ok && (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
  return ok ? "" : "auto or an algorithm name (letters, digits, - and _; at most 31 characters)";
}

// A file every rank reads at init: checked now, so the error names the
// setting before anything else runs. Only a regular file: a FIFO would
// block init in open(), a device would be read without end (the reader,
// readRegularFile, checks again: the file may change meanwhile).
std::string readableFile(const std::string& v) {
  if (v.empty()) return "";
  struct stat st;
  if (stat(v.c_str(), &st) != 0 || access(v.c_str(), R_OK) != 0)
    return std::string("a readable file (") + strerror(errno) + ")";
  if (!S_ISREG(st.st_mode)) return std::string("a readable regular file, not ") + notRegularFile(st.st_mode);
  return "";
}

// A file rank 0 writes; whether it can be created is only known then.
std::string writableFileName(const std::string& v) {
  struct stat st;
  if (!v.empty() && (v.back() == '/' || (stat(v.c_str(), &st) == 0 && S_ISDIR(st.st_mode))))
    return "a file name, not a directory";
  return "";
}

// A directory hoccl creates or reuses: anything but an existing non-directory.
std::string directoryName(const std::string& v) {
  struct stat st;
  if (!v.empty() && stat(v.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return "a directory (a file has that name)";
  return "";
}

std::string debugFile(const std::string& v) { return checkLogFilePattern(v); }

// HOCCL_DEBUG_DUMP_SIGNAL: 0 (none), SIGUSR1 or SIGUSR2 (with or without
// SIG, any case), or a number; never one a process cannot handle.
Parser<int> dumpSignal() {
  return [](const std::string& v, int* out) -> std::string {
    const std::string name = lower(v.compare(0, 3, "SIG") == 0 || v.compare(0, 3, "sig") == 0 ? v.substr(3) : v);
    long long x = -1;
    if (name == "usr1") x = SIGUSR1;
    else if (name == "usr2") x = SIGUSR2;
    else if (!parseInt(v, &x)) x = -1;
    if (x < 0 || x > 64 || x == SIGKILL || x == SIGSTOP)
      return "0 (none), SIGUSR1, SIGUSR2 or a signal number other than 9 and 19";
    *out = static_cast<int>(x);
    return "";
  };
}

// ---- The logger's settings ---------------------------------------------------

const std::vector<std::pair<std::string, LogLevel>> kLevels = {{"NONE", LogLevel::None},
                                                               {"VERSION", LogLevel::Version},
                                                               {"WARN", LogLevel::Warn},
                                                               {"INFO", LogLevel::Info},
                                                               {"TRACE", LogLevel::Trace}};

Parser<LogLevel> logLevel() {
  return [](const std::string& v, LogLevel* out) -> std::string {
    for (const auto& [name, level] : kLevels) {
      if (strcasecmp(v.c_str(), name.c_str()) == 0) {
        *out = level;
        return "";
      }
    }
    return "one of NONE, VERSION, WARN, INFO, TRACE";
  };
}

std::string showLevel(const LogLevel& l) {
  for (const auto& [name, level] : kLevels)
    if (level == l) return name;
  return "?";
}

std::string showMask(const uint32_t& m) {
  char buf[16];
  snprintf(buf, sizeof buf, "%#x", m);
  return buf;
}

// ---- The table ---------------------------------------------------------------

constexpr bool kAllRanks = true;  // must match across ranks
constexpr bool kPerRank = false;

std::vector<SettingDecl> makeTable() {
  using S = Settings;
  return {
      {"HOCCL_DEBUG", "NONE",
       "Log level: NONE, VERSION, WARN (each error once per rank), INFO (init steps and timing, connections, "
       "each algorithm choice) or TRACE (every call).",
       field<LogLevel>(&S::debugLevel, logLevel(), showLevel), kPerRank},
      {"HOCCL_DEBUG_SUBSYS", "ALL",
       "Comma-separated subsystems to log (INIT, COLL, BOOTSTRAP, SHM, NET, TUNE, ENV, ALL); a "
       "leading ^ excludes the listed ones.",
       field<uint32_t>(&S::debugSubsys, parseLogSubsystems, showMask), kPerRank},
      {"HOCCL_DEBUG_FILE", "",
       "Write the log to this file instead of stderr; %h expands to the host name, %p to the pid, %% to %.",
       field<std::string>(&S::debugFile, textWhere(debugFile)), kPerRank},
      {"HOCCL_DEBUG_DUMP", "",
       "Flight recorder: each communicator keeps its last calls (number, collective, count, type, operator, root, "
       "algorithm, state, and the step and peers a stalled call waits on), and the process writes them all to this "
       "file when a call fails (error, timeout, abort), on hocclCommAbort and on HOCCL_DEBUG_DUMP_SIGNAL; %h expands "
       "to the host name, %p to the pid, %% to %. `hoccl-info --why FILES` reads the files of all ranks and names "
       "the rank that never arrived or the call ranks disagree on (docs/troubleshooting.md). Unset: nothing is "
       "recorded.",
       field<std::string>(&S::debugDump, textWhere(debugFile)), kPerRank},
      {"HOCCL_DEBUG_DUMP_CALLS", "64",
       "Calls each communicator's flight recorder keeps (HOCCL_DEBUG_DUMP): 1 to 65536, rounded up to a power of two.",
       field<int>(&S::debugDumpCalls, integerIn<int>(1, 65536)), kPerRank},
      {"HOCCL_DEBUG_DUMP_SIGNAL", "SIGUSR1",
       "With HOCCL_DEBUG_DUMP: the signal on which a process writes its dump (kill -USR1 PID), without stopping; "
       "0: none. Installed at the first communicator's init; a handler the program installed before still runs "
       "after hoccl's, one it installs later replaces it.",
       field<int>(&S::debugDumpSignal, dumpSignal()), kPerRank},
      {"HOCCL_TIMEOUT", "300",
       "Seconds (0.001 to 10000000; 0.5 is half a second) any wait (bootstrap, connection, a collective making no progress) may "
       "last before it becomes an error; the rendezvous of a unique id waits for its first rank without limit, "
       "then this long for the rest.",
       field<double>(&S::timeoutSec, positiveSeconds()), kPerRank},
      {"HOCCL_HEARTBEAT_TIMEOUT", "5",
       "Seconds a process on another host may leave this one's heartbeats unanswered before the ranks "
       "waiting on it fail with hocclRemoteError naming it (\"no heartbeat for N s\"): a cut link, a frozen "
       "host, a stopped process. A peer that is alive but slow to reach a call still answers, so this can "
       "be much shorter than HOCCL_TIMEOUT; but a process starved of CPU (far more busy threads than "
       "cores) answers late too, so keep it well above the longest stall such a host may see (the silent "
       "process logs how long its heartbeat thread did not run). 0 turns heartbeats off.",
       field<double>(&S::heartbeatTimeoutSec, secondsIn(0.1, 1e7, true)), kPerRank},
      {"HOCCL_HEARTBEAT_INTERVAL", "0.5",
       "Seconds between the heartbeats each process sends to each process on another host it shares a "
       "communicator with (at most a quarter of HOCCL_HEARTBEAT_TIMEOUT is used).",
       field<double>(&S::heartbeatIntervalSec, secondsIn(0.01, 60, false)), kPerRank},
      {"HOCCL_COMM_ID", "",
       "host:port of the rendezvous: rank 0 listens there, the others connect; replaces passing a "
       "unique id.",
       field<std::string>(&S::commId, textWhere(hostPort)), kPerRank},
      {"HOCCL_HOSTID", "",
       "Node identity; ranks with equal ids share memory. Default: host name + boot id. Set it to "
       "make one machine act as several nodes. Free text: up to 127 printable characters.",
       field<std::string>(&S::hostId, textWhere(hostIdText)), kPerRank},
      {"HOCCL_SOCKET_IFNAME", "",
       "Network interface for the bootstrap and TCP connections: a prefix list (eth,ib), ^ to "
       "exclude, = for exact names. Unset: each rank uses the interface the kernel routes to the "
       "rendezvous; hocclGetUniqueId serves the rendezvous on the first interface that is up and "
       "not loopback (nor docker*, virbr*), else on loopback.",
       field<std::string>(&S::socketIfname, textWhere(ifnameRule)), kPerRank},
      {"HOCCL_TOPO_FILE", "",
       "Topology file: switch groups and overrides of what is discovered (docs/topology-file.md); a "
       "name ending in .conf is read as a Slurm topology.conf.",
       field<std::string>(&S::topoFile, textWhere(readableFile)), kPerRank},
      {"HOCCL_TOPO_DUMP_FILE", "", "Rank 0 writes the whole system here, in the topology file format.",
       field<std::string>(&S::topoDumpFile, textWhere(writableFileName)), kPerRank},
      {"HOCCL_TOPO_PROBE", "0",
       "1: a communicator spanning nodes, given no HOCCL_TOPO_FILE or HOCCL_TUNE_FILE, measures the network "
       "at set-up as `hoccl-topo probe` does (leaf groups, link and uplink rates, queues; about 12 s for 4 "
       "nodes under 2 leaves) and uses the result as those files. Measured once per job: later "
       "communicators reuse it (docs/topology-file.md).",
       field<bool>(&S::topoProbe, zeroOrOne()), kAllRanks},
      {"HOCCL_TOPO_PROBE_DIR", "",
       "Where HOCCL_TOPO_PROBE keeps its result (topology.json, tune.conf), per node: reused when it names "
       "every node of a communicator, else measured again and replaced. Unset: a directory per job under "
       "$TMPDIR (or /tmp) when Slurm, torchrun (--rdzv_id), Open MPI or PMIx names the job, else none.",
       field<std::string>(&S::topoProbeDir, textWhere(directoryName)), kPerRank},
      {"HOCCL_SOCKET_NSTREAMS", "1",
       "TCP streams per network connection (1-16); large messages are split across them. One is the default: "
       "HO-Ring's rails already run many connections at once, and extra streams over a shaped or shared link "
       "lose to each other.",
       field<int>(&S::socketStreams, integerIn<int>(1, 16)), kPerRank},
      {"HOCCL_SOCKET_DUPLEX", "1",
       "1: two ranks that send to each other over TCP carry both directions' small messages (headers and "
       "payloads up to 4 KiB) on one socket, so that each direction's acknowledgements ride on the other's "
       "data; 0: one socket per direction (NCCL's layout), which costs a bare acknowledgement per message.",
       field<bool>(&S::socketDuplex, zeroOrOne()), kAllRanks},
      {"HOCCL_NET", "auto",
       "Network between nodes: ib (verbs; fail if unavailable), socket (TCP), or auto: IB when an active "
       "port exists, else TCP with an INFO line saying why. Set it alike on every rank.",
       field<std::string>(&S::net, oneOf({"auto", "ib", "socket"})), kPerRank},
      {"HOCCL_IB_HCA", "",
       "IB ports to use, as NCCL_IB_HCA: mlx5_0:1,mlx5_1 (name prefixes, optional :port from 1 to 255); a "
       "leading = for exact names, ^ to exclude. Default: every active port.",
       field<std::string>(&S::ibHca, textWhere(hcaRule)), kPerRank},
      {"HOCCL_IB_GID_INDEX", "-1",
       "GID index for RoCE; -1 picks one: RoCE v2 with an IPv4 address first, else the best that exists.",
       field<int>(&S::ibGidIndex, integerIn<int>(-1, 255)), kPerRank},
      {"HOCCL_IB_QPS_PER_CONN", "1",
       "Queue pairs per IB connection (1-16); messages of 64 KiB and more are split across them.",
       field<int>(&S::ibQpsPerConn, integerIn<int>(1, 16)), kPerRank},
      {"HOCCL_IB_TIMEOUT", "20", "IB ack timeout exponent: 4.096 us x 2^value per retry (1-31).",
       field<int>(&S::ibTimeout, integerIn<int>(1, 31)), kPerRank},
      {"HOCCL_IB_RETRY_CNT", "7", "IB retransmissions before a connection fails (0-7).",
       field<int>(&S::ibRetryCnt, integerIn<int>(0, 7)), kPerRank},
      {"HOCCL_IB_GDR_FLUSH", "1",
       "After a receive into GPU memory registered with the NIC (GPUDirect RDMA), read from it once over a "
       "loopback queue pair before the GPU may use it, as NCCL does (0: skip, as NCCL_GDR_FLUSH_DISABLE=1).",
       field<bool>(&S::ibGdrFlush, zeroOrOne()), kPerRank},
      {"HOCCL_CONNECT_RETRIES", "50", "Times a bootstrap connection is retried (with back-off) before giving up.",
       field<int>(&S::connectRetries, integerIn<int>(0, 1000000, "an integer >= 0")), kPerRank},
      {"HOCCL_SLICE_BYTES", "auto",
       "Bytes per pipeline slice, each a message of its own (and per slot of a connection). auto: 128K for a "
       "communicator on one node, 512K for one that spans nodes (NCCL's step: its 4 MiB buffer over 8 steps).",
       field<uint64_t>(&S::sliceBytes,
                       [](const std::string& v, uint64_t* out) -> std::string {
                         long long x;
                         if (strcasecmp(v.c_str(), "auto") == 0) {
                           *out = 0;
                           return "";
                         }
                         if (!parseInt(v, &x) || x < 4096 || x > (64ll << 20) || (x % 64) != 0)
                           return "auto, or a byte count from 4096 to 64M, a multiple of 64 (K/M suffixes allowed)";
                         *out = static_cast<uint64_t>(x);
                         return "";
                       },
                       [](const uint64_t& b) { return b == 0 ? std::string("auto") : std::to_string(b); }),
       kAllRanks},
      {"HOCCL_SLOTS", "8", "Slots per connection: slices in flight between two ranks.",
       field<int>(&S::slots, integerIn<int>(2, 64)), kAllRanks},
      {"HOCCL_NCHANNELS", "auto",
       "Channels (independent rings over disjoint parts of the data): auto lets the tuner pick 1 to 4 per "
       "call, a number fixes it.",
       field<int>(&S::nchannels, autoOr(integerIn<int>(1, 32), "auto or an integer from 1 to 32"), showAuto),
       kAllRanks},
      {"HOCCL_ALGO", "auto",
       "Algorithm: auto (the cost model picks per collective and size, after oneshot_shm takes the calls "
       "HOCCL_BOARD_BYTES gives it), or force one by its name in hoccl-info --algorithms (ring, "
       "hierarchical, horing, doubling, leaderdoubling, oneshot, oneshot_shm; board is oneshot_shm's former "
       "name); the communicator checks the name against that list. hierarchical and horing group ranks by "
       "node and switch. Where the forced algorithm lacks a collective, or oneshot_shm does not fit a call "
       "(ranks on several nodes, more than 512 bytes per rank, device buffers), the cost model picks "
       "instead and the tuner's log line (HOCCL_DEBUG=INFO) says why; forcing any other algorithm turns "
       "oneshot_shm off.",
       field<std::string>(&S::algo,
                          [](const std::string& v, std::string* out) -> std::string {
                            std::string why = algorithmNameForm(v);
                            if (why.empty()) *out = lower(v);
                            return why;
                          }),
       kAllRanks},
      {"HOCCL_TUNE_FILE", "",
       "Tune file: link latencies and speeds for the cost model, and rules "
       "'<collective> <lo>-<hi> <algorithm> [channels=N] [chunks=K]' that win over it (docs/algorithms.md). "
       "Every rank must read the same file.",
       field<std::string>(&S::tuneFile, textWhere(readableFile)), kPerRank},
      {"HOCCL_SPIN", "-1",
       "Polls before a waiting rank sleeps on its futex; -1 picks: 128 yielding polls when the ranks on this "
       "machine outnumber its cores (counting a split's parent and every live communicator of the process), "
       "else 20000 busy polls. A value set here also replaces the longer polls of HOCCL_NET_SPIN_BYTES.",
       field<int>(&S::spinIters, integerIn<int>(-1, 100000000, "-1 (automatic) or an iteration count >= 0")),
       kPerRank},
      {"HOCCL_NET_SPIN_BYTES", "65536",
       "With more ranks on a machine than cores, a waiting rank of a communicator across nodes polls 2048 "
       "times before it sleeps in calls of at most this many bytes per rank (the buffer; all-gather: the "
       "input; reduce-scatter: the output), and as in any call (HOCCL_SPIN) in larger ones, whose waits "
       "last long enough that polling ranks slow the ranks they wait for. 0: never the longer polls.",
       field<uint64_t>(&S::netSpinBytes, integerIn<uint64_t>(0, uint64_t(1) << 40, "a byte count (0 = never)")),
       kPerRank},
      {"HOCCL_CHECK_CALLS", "1",
       "1: every message carries the collective's signature, so calls that differ across ranks "
       "are reported instead of corrupting data.",
       field<bool>(&S::checkCalls, zeroOrOne()), kAllRanks},
      {"HOCCL_DIRECT_BYTES", "16K",
       "Slices of at least this many bytes travel by reference between ranks of one process (and "
       "between processes of one node as HOCCL_CMA says): the receiver copies them once from the "
       "sender's buffer. 0 turns it off.",
       field<uint64_t>(&S::directBytes,
                       integerIn<uint64_t>(0, 1ll << 30, "a byte count >= 0 (K/M suffixes allowed; 0 = off)")),
       kPerRank},
      {"HOCCL_BOARD_BYTES", "512",
       "All-reduces, all-gathers, reduce-scatters, broadcasts and reduces of a communicator whose ranks all "
       "share one node, putting at most this many bytes in each rank's slot (all-reduce, broadcast, reduce: "
       "the buffer; all-gather: the send buffer; reduce-scatter: the whole send buffer), run one-shot over "
       "shared memory (oneshot_shm, formerly called the board): each rank writes its input to its own slot "
       "in shared memory once (a broadcast: the root only) and reads every rank's from there. The tuner "
       "takes these calls there before anything else under auto; 0 turns that off, as does HOCCL_ALGO naming "
       "another algorithm; HOCCL_ALGO=oneshot_shm runs every call that fits the 512-byte slots there "
       "whatever this says. At most 512.",
       field<uint64_t>(&S::oneShotShmBytes, integerIn<uint64_t>(0, 512, "a byte count from 0 to 512 (0 = off)")),
       kAllRanks},
      {"HOCCL_CMA", "auto",
       "Processes on one node read each other's buffers with process_vm_readv for slices sent by "
       "reference (one copy instead of two through shared memory): auto for calls that reduce nothing "
       "(all-gather, broadcast, all-to-all, send/recv) up to 1 MiB, slices of at least 32 KiB, where it "
       "is faster; 1 for every call and every slice HOCCL_DIRECT_BYTES allows (a reduction gains no copy "
       "and pays the system call); 0 never. Where the kernel refuses (ptrace policy) it is not used.",
       field<int>(&S::crossMemoryAttach,
                  [](const std::string& v, int* out) -> std::string {
                    if (strcasecmp(v.c_str(), "auto") == 0) *out = -1;
                    else if (v == "0" || v == "1") *out = v[0] - '0';
                    else return "auto, 0 or 1";
                    return "";
                  },
                  [](const int& m) { return m < 0 ? std::string("auto") : std::to_string(m); }),
       kPerRank},
      {"HOCCL_DEVICE_CHANNELS", "auto",
       "Most channels (one CTA each) a collective on device buffers uses: auto takes one per 128 KiB ring "
       "chunk, capped so every rank's CTAs of two calls fit on their GPU at once, one per multiprocessor; a "
       "number fixes it (still capped by the GPU's multiprocessors).",
       field<int>(&S::deviceChannels, autoOr(integerIn<int>(1, 64), "auto or an integer from 1 to 64"), showAuto),
       kAllRanks},
      {"HOCCL_DEVICE_THREADS", "512", "Threads per CTA of the device kernels: 64 to 512, a multiple of 32.",
       field<int>(&S::deviceThreads,
                  [](const std::string& v, int* out) -> std::string {
                    long long x;
                    if (!parseInt(v, &x) || x < 64 || x > 512 || x % 32 != 0)
                      return "an integer from 64 to 512, a multiple of 32";
                    *out = static_cast<int>(x);
                    return "";
                  }),
       kPerRank},
      {"HOCCL_P2P_DISABLE", "0",
       "1: device connections between ranks never write into another GPU's memory, even on one GPU; "
       "they stage through host memory, as pairs of GPUs without peer access always do (for diagnosis "
       "and for testing that path).",
       field<bool>(&S::p2pDisable, zeroOrOne()), kPerRank},
      {"HOCCL_P2P_CHECK", "1",
       "Device buffers, ranks on different GPUs: 1 tests each pair's path before its kernels write "
       "into the peer GPU (64 KiB copied into the peer's memory and back, compared; between "
       "processes through the same kind of mapping as their connections) and stages the pair "
       "through host memory, with a warning, if the data does not come back intact; 0 trusts the "
       "driver, and for a peer GPU this process does not see NVML's P2P status (staged where NVML "
       "says no or cannot say).",
       field<bool>(&S::p2pCheck, zeroOrOne()), kPerRank},
      {"HOCCL_DEVICE_IPC", "auto",
       "How ranks in different processes of a host share device connection memory: fd (CUDA VMM "
       "memory passed as a POSIX fd over a Unix socket), fabric (CUDA VMM memory as fabric handles "
       "over the bootstrap: needs an IMEX channel), legacy (cuIpc handles over the bootstrap); fabric "
       "and legacy serve processes that cannot reach each other's Unix sockets, such as containers in "
       "separate network namespaces; auto: fd where every rank's driver has VMM, else legacy.",
       field<std::string>(&S::deviceIpc, oneOf({"auto", "fd", "fabric", "legacy"})), kAllRanks},
      {"HOCCL_NET_DEVICE_PATH", "auto",
       "How a device-buffer connection to a rank on another host moves its data through the network "
       "proxy: host (slots in pinned host memory the GPU maps; the kernel writes them across PCIe and "
       "the network sends them in place), copy (slots in GPU memory, copied through host memory by the "
       "copy engine around each send and receive), gdr (GPUDirect RDMA: slots in GPU memory the network "
       "registers as a dma-buf and reads and writes in place; an error where the driver or the device "
       "cannot); auto: host. Each end chooses for itself; the wire format is the same (docs/gpu.md).",
       field<std::string>(&S::netDevicePath, oneOf({"auto", "host", "copy", "gdr"})), kPerRank},
      {"HOCCL_PROXY_SPIN_US", "200",
       "Device buffers across hosts: microseconds the network proxy keeps polling after it last moved a "
       "message; after that, while a launch of its communicator runs, it looks again after 20 us, "
       "doubling the delay up to HOCCL_PROXY_IDLE_US while nothing moves, and sleeps otherwise.",
       field<double>(&S::proxySpinUs, microseconds()), kPerRank},
      {"HOCCL_PROXY_IDLE_US", "1000",
       "Device buffers across hosts: the longest the network proxy sleeps between looks at its "
       "connections when idle, so how late it can notice the first message of a CUDA graph replayed "
       "without a host call.",
       field<double>(&S::proxyIdleUs, microseconds()), kPerRank},
      {"HOCCL_ISA", "auto", "Force the data-op instruction set: auto, scalar, avx2, avx512.",
       field<std::string>(&S::isa, oneOf({"auto", "scalar", "avx2", "avx512"})), kPerRank},
      {"HOCCL_TUNER_RULES", "",
       "NCCL tuner plugin: a rule file in the CSV format of NCCL's example tuner; its rules win over "
       "the model. Unset: NCCL_TUNER_CONFIG_FILE if set, else none (docs/nccl-plugins.md).",
       field<std::string>(&S::tunerRules, textWhere(readableFile)), kPerRank},
  };
}

}  // namespace

const std::vector<SettingDecl>& allSettings() {
  static const std::vector<SettingDecl> table = makeTable();
  return table;
}

}  // namespace hoccl
