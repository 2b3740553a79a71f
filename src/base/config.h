// Every setting hoccl reads, declared once: name, default, doc, validator.
// The environment is read into an immutable Settings snapshot when a
// communicator is created; hoccl-info prints the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hoccl {

struct SettingDecl {
  const char* name;
  const char* defaultValue;
  const char* doc;
  // Returns an empty string when `value` is acceptable, else why not.
  std::string (*validate)(const std::string& value);
  // Settings that change what goes over the wire must agree on every rank;
  // the bootstrap checks them at init.
  bool mustMatchAcrossRanks;
};

const std::vector<SettingDecl>& allSettings();

// The value of a setting: the environment if set and non-empty, else the
// default. Unknown names are a programming error (abort).
std::string settingValue(const char* name);

struct Settings {
  double timeoutSec = 300;        // HOCCL_TIMEOUT
  uint64_t sliceBytes = 0;        // HOCCL_SLICE_BYTES
  int slots = 0;                  // HOCCL_SLOTS
  int nchannels = 0;              // HOCCL_NCHANNELS (0: auto)
  int spinIters = -1;             // HOCCL_SPIN (-1: automatic)
  std::string algo;               // HOCCL_ALGO
  std::string hostId;             // HOCCL_HOSTID (empty: host name + boot id)
  std::string commId;             // HOCCL_COMM_ID
  std::string socketIfname;       // HOCCL_SOCKET_IFNAME
  int socketStreams = 1;          // HOCCL_SOCKET_NSTREAMS
  std::string net = "auto";       // HOCCL_NET
  std::string ibHca;              // HOCCL_IB_HCA
  int ibGidIndex = -1;            // HOCCL_IB_GID_INDEX
  int ibQpsPerConn = 1;           // HOCCL_IB_QPS_PER_CONN
  int ibTimeout = 20;             // HOCCL_IB_TIMEOUT
  int ibRetryCnt = 7;             // HOCCL_IB_RETRY_CNT
  std::string topoFile;           // HOCCL_TOPO_FILE
  std::string topoDumpFile;       // HOCCL_TOPO_DUMP_FILE
  std::string tuneFile;           // HOCCL_TUNE_FILE
  int connectRetries = 0;         // HOCCL_CONNECT_RETRIES
  bool checkCalls = true;         // HOCCL_CHECK_CALLS
  uint64_t directBytes = 0;       // HOCCL_DIRECT_BYTES
  bool crossMemoryAttach = false; // HOCCL_CMA

  // Wire-relevant settings as "NAME=value" lines, compared across ranks.
  std::string fingerprint() const;
};

// Reads and validates every setting. On a bad value returns false and sets
// `error` to a message naming the variable, the value and what is expected.
bool loadSettings(Settings* out, std::string* error);

}  // namespace hoccl
