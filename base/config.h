// Every setting hoccl reads, declared once: one row of the table in
// config_table.cc carries the name, the default, the doc, how the text
// becomes one typed field of Settings (refusing what is wrong), and whether
// every rank must agree on it. The environment is read once per process
// into an immutable snapshot; each communicator copies its Settings and
// applies its hocclConfig_t on top (src/comm/comm_settings.h). hoccl-info
// prints the table, and the bootstrap compares the fingerprint of the
// must-match rows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"

namespace hoccl {

// HOCCL_SLICE_BYTES=auto: the slice (and slot) of a communicator whose
// ranks share one node, and of one that spans nodes. Inside a node small
// slices pipeline the copies in cache; a network message costs wake-ups
// and system calls at both ends, so across nodes a slice is NCCL's step
// (its 4 MiB buffer over 8 steps). On the emulated cluster (2 nodes x 2
// ranks, 10 Gbit/s) 512 KiB against 128 KiB ran all-reduces of 1 to 64 MiB
// in 0.63-0.90x the time (at 1 Gbit/s the link binds either); on one node
// (4 ranks) 128 KiB ran 4 MiB in 0.6x the time of 512 KiB
// (results/20261130-net-slices).
inline constexpr uint64_t kSliceBytesOneNode = uint64_t(128) << 10;
inline constexpr uint64_t kSliceBytesAcrossNodes = uint64_t(512) << 10;
inline constexpr uint64_t defaultSliceBytes(bool acrossNodes) {
  return acrossNodes ? kSliceBytesAcrossNodes : kSliceBytesOneNode;
}

struct Settings {
  LogLevel debugLevel = LogLevel::None;  // HOCCL_DEBUG
  uint32_t debugSubsys = kSubAll;        // HOCCL_DEBUG_SUBSYS
  std::string debugFile;                 // HOCCL_DEBUG_FILE
  std::string debugDump;                 // HOCCL_DEBUG_DUMP (empty: no flight recorder)
  int debugDumpCalls = 64;               // HOCCL_DEBUG_DUMP_CALLS
  int debugDumpSignal = 10;              // HOCCL_DEBUG_DUMP_SIGNAL (0: none; SIGUSR1 on Linux)
  double timeoutSec = 300;               // HOCCL_TIMEOUT
  double heartbeatTimeoutSec = 5;        // HOCCL_HEARTBEAT_TIMEOUT (0: off)
  double heartbeatIntervalSec = 0.5;     // HOCCL_HEARTBEAT_INTERVAL
  uint64_t sliceBytes = 0;               // HOCCL_SLICE_BYTES (0: auto, defaultSliceBytes)
  int slots = 0;                         // HOCCL_SLOTS
  int nchannels = 0;                     // HOCCL_NCHANNELS (0: auto)
  int spinIters = -1;                    // HOCCL_SPIN (-1: automatic)
  uint64_t netSpinBytes = 65536;         // HOCCL_NET_SPIN_BYTES
  std::string algo;                      // HOCCL_ALGO, lower case
  std::string hostId;                    // HOCCL_HOSTID (empty: host name + boot id)
  std::string commId;                    // HOCCL_COMM_ID
  std::string socketIfname;              // HOCCL_SOCKET_IFNAME
  int socketStreams = 1;                 // HOCCL_SOCKET_NSTREAMS
  bool socketDuplex = true;              // HOCCL_SOCKET_DUPLEX
  std::string net = "auto";              // HOCCL_NET
  std::string ibHca;                     // HOCCL_IB_HCA
  int ibGidIndex = -1;                   // HOCCL_IB_GID_INDEX
  int ibQpsPerConn = 1;                  // HOCCL_IB_QPS_PER_CONN
  int ibTimeout = 20;                    // HOCCL_IB_TIMEOUT
  int ibRetryCnt = 7;                    // HOCCL_IB_RETRY_CNT
  bool ibGdrFlush = true;                // HOCCL_IB_GDR_FLUSH
  std::string topoFile;                  // HOCCL_TOPO_FILE
  std::string topoDumpFile;              // HOCCL_TOPO_DUMP_FILE
  bool topoProbe = false;                // HOCCL_TOPO_PROBE
  std::string topoProbeDir;              // HOCCL_TOPO_PROBE_DIR (empty: one per job, if the job is named)
  std::string tuneFile;                  // HOCCL_TUNE_FILE
  int connectRetries = 0;                // HOCCL_CONNECT_RETRIES
  bool checkCalls = true;                // HOCCL_CHECK_CALLS
  uint64_t directBytes = 0;              // HOCCL_DIRECT_BYTES
  uint64_t oneShotShmBytes = 512;        // HOCCL_BOARD_BYTES
  int crossMemoryAttach = -1;            // HOCCL_CMA: 0 never, 1 every call, -1 auto (calls that reduce nothing)
  int deviceChannels = 0;                // HOCCL_DEVICE_CHANNELS (0: auto)
  int minCTAs = 0, maxCTAs = 0;          // hocclConfig_t's (0: unset); no environment variable
  // What set timeoutSec, as messages name it: "HOCCL_TIMEOUT", "HOCCL_TIMEOUT's
  // default", "hocclConfig_t.timeoutSec" or "hocclConfig_t.timeoutMs"
  // (src/comm/comm_settings.cc).
  const char* timeoutFrom = "HOCCL_TIMEOUT";
  int deviceThreads = 512;               // HOCCL_DEVICE_THREADS
  bool p2pDisable = false;               // HOCCL_P2P_DISABLE
  bool p2pCheck = true;                  // HOCCL_P2P_CHECK
  std::string deviceIpc = "auto";        // HOCCL_DEVICE_IPC
  std::string netDevicePath = "auto";    // HOCCL_NET_DEVICE_PATH
  double proxySpinUs = 200;              // HOCCL_PROXY_SPIN_US
  double proxyIdleUs = 1000;             // HOCCL_PROXY_IDLE_US
  std::string isa = "auto";              // HOCCL_ISA, lower case
  std::string tunerRules;                // HOCCL_TUNER_RULES

  // The must-match rows as "NAME=value" lines, compared across ranks.
  std::string fingerprint() const;
};

// How a row's text becomes its field. Built by the typed helpers in
// config_table.cc, so a row cannot parse into a field of another type.
struct SettingField {
  // Parses and checks `text`. Acceptable: writes the row's field of `out`
  // and returns "". Otherwise returns what a value must be ("an integer
  // from 2 to 64") and leaves `out` alone.
  std::function<std::string(const std::string& text, Settings* out)> parse;
  // The field's value as text (the fingerprint's form).
  std::function<std::string(const Settings& s)> show;
};

struct SettingDecl {
  const char* name;
  const char* defaultValue;
  const char* doc;
  SettingField field;
  // Settings that change what goes over the wire must agree on every rank;
  // the bootstrap checks them at init (Settings::fingerprint).
  bool mustMatchAcrossRanks;
};

const std::vector<SettingDecl>& allSettings();
// The row of `name`; an undeclared name is a programming error (abort).
const SettingDecl& settingDecl(const char* name);

// How every bad value is reported: NAME="value" is invalid: expected ...
std::string invalidSetting(const char* name, const std::string& value, const std::string& expected);

// Sets one row of `s` from text, through the row's parser: "" when the value
// was acceptable, else the invalidSetting message.
std::string applySetting(Settings* s, const char* name, const std::string& text);

// HOCCL_ALGO's valid names live in the algorithm registry, above this layer.
// Its row checks the form of a name; the communicator checks the name with
// this against the registry's list: "" if `value` is one of `choices`
// (ignoring case), else "one of a, b, c".
std::string expectOneOf(const std::string& value, const std::vector<std::string>& choices);

// What the environment said, read once: every row's text (the variable when
// set and non-empty, else the default) and its parsed value.
class SettingsSnapshot {
 public:
  // Reads and checks every row now.
  static SettingsSnapshot fromEnvironment();

  // Every acceptable row's value; a row with a bad value keeps its default.
  const Settings& values() const { return values_; }
  // The first bad value in table order (the invalidSetting message), or "".
  const std::string& error() const { return error_; }
  // One row: its text, whether the environment set it, and its problem
  // (the invalidSetting message, "" if none).
  const std::string& text(const char* name) const;
  bool fromEnvironment(const char* name) const;
  const std::string& problem(const char* name) const;

 private:
  struct Row {
    std::string text;
    bool fromEnvironment = false;
    std::string problem;
  };
  const Row& row(const char* name) const;
  std::vector<Row> rows_;  // as allSettings()
  Settings values_;
  std::string error_;
};

// The process's snapshot: the environment is read on the first call (from
// any thread) and never again, so every communicator, the logger, the data
// ops and the plugins see the same values.
std::shared_ptr<const SettingsSnapshot> processSettings();

// For tests that change HOCCL_* variables between communicators: the next
// processSettings() reads the environment again. Communicators already made
// keep their settings; the logger and the data ops keep what they read first.
void reloadSettingsForTesting();

}  // namespace hoccl
