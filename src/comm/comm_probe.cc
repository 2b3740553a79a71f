// HOCCL_TOPO_PROBE=1: a communicator that spans nodes, given no topology or
// tune file, measures its network at set-up (src/topo/probe, the same probe
// as `hoccl-topo probe`) and uses what it found as those files.
//
// Once per job: a result is kept in the process, handed to communicators
// split from this one, and written (by each node's first rank) to a cache
// directory: HOCCL_TOPO_PROBE_DIR, else one per job under $TMPDIR when the
// launcher names the job. Rank 0 decides for everyone whether to measure
// or reuse, so the ranks cannot disagree; a cached result is reused when
// it names every node of the communicator.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>

#include "base/log.h"
#include "base/regular_file.h"
#include "src/comm/comm.h"
#include "src/topo/probe/probe_run.h"

namespace hoccl {
namespace {

const char kTopoName[] = "topology.json";
const char kTuneName[] = "tune.conf";

std::mutex gCacheMutex;
std::vector<std::shared_ptr<const ProbedFiles>> gCache;  // every result of this process, newest last
std::atomic<int> gMeasured{0};

bool covers(const ProbedFiles& f, const topo::System& sys) {
  for (const topo::NodeInfo& n : sys.nodes)
    if (!f.hosts.count(n.hostId)) return false;
  return true;
}

// The cache directory: HOCCL_TOPO_PROBE_DIR, else one per job when the
// launcher names it (Slurm, torchrun with an --rdzv_id, Open MPI, PMIx),
// else none (the result lives only in this process).
std::string cacheDir(const Settings& s) {
  if (!s.topoProbeDir.empty()) return s.topoProbeDir;
  for (const char* var : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}) {
    const char* v = getenv(var);
    if (!v || !*v || strcmp(v, "none") == 0) continue;
    std::string job;
    for (const char* p = v; *p && job.size() < 64; ++p) job += isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
    const char* tmp = getenv("TMPDIR");
    return std::string(tmp && *tmp ? tmp : "/tmp") + "/hoccl-probe-" + std::to_string(getuid()) + "-" + job;
  }
  return "";
}

// One file of a cached result: *found false if nothing has its name; what
// is there must be a regular file of at most the size a result can have.
Status readCached(const std::string& path, bool* found, std::string* out) {
  struct stat st;
  *found = stat(path.c_str(), &st) == 0;
  if (!*found) return Status();
  return readRegularFile(path, size_t(64) << 20, out).context("HOCCL_TOPO_PROBE_DIR");
}

// The node names a topology file puts under its switches.
Status hostsOf(const std::string& topoText, const std::string& label, std::set<std::string>* out) {
  topo::TopoOverrides o;
  HOCCL_TRY(topo::parseTopoFile(topoText, label, &o));
  for (const topo::SwitchInfo& sw : o.switches) out->insert(sw.nodes.begin(), sw.nodes.end());
  return Status();
}

// A result from the directory, if both files are there. A file that is
// there but does not parse is an error naming it.
Status loadCached(const std::string& dir, std::shared_ptr<const ProbedFiles>* out) {
  auto f = std::make_shared<ProbedFiles>();
  const std::string topoPath = dir + "/" + kTopoName, tunePath = dir + "/" + kTuneName;
  bool topoFound = false, tuneFound = false;
  HOCCL_TRY(readCached(topoPath, &topoFound, &f->topo));
  if (!topoFound) return Status();
  HOCCL_TRY(readCached(tunePath, &tuneFound, &f->tune));
  if (!tuneFound) return Status();
  f->from = dir;
  HOCCL_TRY(hostsOf(f->topo, topoPath, &f->hosts).context("HOCCL_TOPO_PROBE's cached result"));
  tune::TuneFile check;
  HOCCL_TRY(tune::parseTuneFile(f->tune, tunePath, tune::LinkModel(), &check)
                .context("HOCCL_TOPO_PROBE's cached result"));
  *out = f;
  return Status();
}

// Writes a file whole or not at all: the nodes of a job may share the
// directory, and a reader must never see half a file.
void writeAtomically(const std::string& dir, const char* name, const std::string& text) {
  const std::string path = dir + "/" + name, tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = fopen(tmp.c_str(), "w");
  bool ok = f && fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = f && fclose(f) == 0 && ok;
  if (ok && rename(tmp.c_str(), path.c_str()) == 0) return;
  HWARN(kSubInit, "HOCCL_TOPO_PROBE: cannot write %s: %s (the result is used, not cached)", path.c_str(),
        strerror(errno));
  unlink(tmp.c_str());
}

void storeOnDisk(const std::string& dir, const ProbedFiles& f) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    HWARN(kSubInit, "HOCCL_TOPO_PROBE: cannot create %s: %s (the result is used, not cached)", dir.c_str(),
          strerror(errno));
    return;
  }
  writeAtomically(dir, kTuneName, f.tune);  // the topology last: loadCached wants both
  writeAtomically(dir, kTopoName, f.topo);
}

// Measures, every rank together over the bootstrap: each node's first rank
// runs the flows. `from` names the result in messages.
Status measure(hocclComm* c, const topo::System& sys, const std::string& from,
               std::shared_ptr<const ProbedFiles>* out) {
  const topo::RankPlacement& me = sys.ranks[static_cast<size_t>(c->rank)];
  probe::Session s;
  s.slot = c->rank;
  s.slots = c->nranks;
  s.nodes = static_cast<int>(sys.nodes.size());
  s.node = me.localRank == 0 ? me.node : -1;
  s.listen = c->boot->listenAddress();
  s.listen.setPort(0);
  s.host = sys.nodes[static_cast<size_t>(me.node)].hostId;
  s.ifname = c->boot->interfaceName();
  Bootstrap& boot = *c->boot;
  s.allGather = [&boot](void* all, size_t bytes) { return boot.allGather(all, bytes); };
  if (c->rank == 0)
    s.progress = [](int index, const probe::Round& r) {
      HTRACE(kSubInit, "HOCCL_TOPO_PROBE: round %d: %s", index + 1, r.what.c_str());
    };
  probe::Outcome got;
  gMeasured.fetch_add(1);
  HOCCL_TRY(probe::run(s, probe::Options(), &got).context("HOCCL_TOPO_PROBE"));
  auto f = std::make_shared<ProbedFiles>();
  f->topo = probe::topologyJson(got.result, got.hosts);
  f->tune = probe::tuneConf(got.result);
  f->hosts.insert(got.hosts.begin(), got.hosts.end());
  f->from = from;
  if (c->rank == 0) {
    std::string summary = probe::summary(got.result, got.hosts);
    HINFO(kSubInit, "HOCCL_TOPO_PROBE: measured %d nodes in %.1f s:\n%s", s.nodes, got.seconds, summary.c_str());
  }
  *out = f;
  return Status();
}

// Rank 0's choice, sent to every rank.
struct Decision {
  int32_t action;  // 0: nothing to do, 1: measure, 2: use the text that follows, 3: fail
  uint64_t topoLen, tuneLen;
  char from[512];  // where the text comes from; with action 3, rank 0's error
};

}  // namespace

int probesMeasuredForTesting() { return gMeasured.load(); }

Status probeTopology(hocclComm* c, const topo::System& sys) {
  const Settings& s = c->settings;
  if (!s.topoProbe) return Status();
  std::shared_ptr<const ProbedFiles> found;
  Decision d{};
  const std::string dir = cacheDir(s);
  if (c->rank == 0) {
    if (sys.nodes.size() < 2) {
      HINFO(kSubInit, "HOCCL_TOPO_PROBE: one node, nothing to measure");
    } else if (!s.topoFile.empty() && !s.tuneFile.empty()) {
      HINFO(kSubInit, "HOCCL_TOPO_PROBE: HOCCL_TOPO_FILE and HOCCL_TUNE_FILE are given; not measuring");
    } else {
      if (c->probed && covers(*c->probed, sys)) found = c->probed;  // split from a measured communicator
      if (!found) {
        std::lock_guard<std::mutex> lock(gCacheMutex);
        for (auto it = gCache.rbegin(); it != gCache.rend() && !found; ++it)
          if (covers(**it, sys)) found = *it;
      }
      Status loaded;
      if (!found && !dir.empty()) {
        loaded = loadCached(dir, &found);
        if (found && !covers(*found, sys)) {
          HINFO(kSubInit, "HOCCL_TOPO_PROBE: %s was measured on other nodes; measuring again", dir.c_str());
          found = nullptr;
        }
      }
      d.action = found ? 2 : 1;
      if (!loaded.ok()) d.action = 3;  // everyone fails with rank 0's message
      const std::string text = !loaded.ok() ? loaded.message() : found ? found->from : std::string();
      snprintf(d.from, sizeof d.from, "%s", text.c_str());
      if (found) d.topoLen = found->topo.size(), d.tuneLen = found->tune.size();
    }
  }
  std::vector<Decision> all(static_cast<size_t>(c->nranks));
  all[static_cast<size_t>(c->rank)] = d;
  HOCCL_TRY(c->boot->allGather(all.data(), sizeof(Decision)).context("HOCCL_TOPO_PROBE"));
  d = all[0];
  std::shared_ptr<const ProbedFiles> use;
  if (d.action == 0) return Status();
  if (d.action == 3) return errorf(hocclInvalidArgument, "%s (as rank 0 read it)", d.from);
  if (d.action == 1) {
    HOCCL_TRY(measure(c, sys, dir.empty() ? "measured at set-up" : dir, &use));
    if (!dir.empty() && sys.ranks[static_cast<size_t>(c->rank)].localRank == 0) storeOnDisk(dir, *use);
  } else {
    // Rank 0's text, to everyone (the texts are a few kB).
    const size_t width = d.topoLen + d.tuneLen;
    std::vector<char> buf(width * static_cast<size_t>(c->nranks));
    if (c->rank == 0) {
      memcpy(buf.data(), found->topo.data(), d.topoLen);
      memcpy(buf.data() + d.topoLen, found->tune.data(), d.tuneLen);
    }
    HOCCL_TRY(c->boot->allGather(buf.data(), width).context("HOCCL_TOPO_PROBE"));
    if (c->rank == 0) {
      HINFO(kSubInit, "HOCCL_TOPO_PROBE: using the result from %s", found->from.c_str());
      use = found;
    } else {
      auto f = std::make_shared<ProbedFiles>();
      f->topo.assign(buf.data(), d.topoLen);
      f->tune.assign(buf.data() + d.topoLen, d.tuneLen);
      f->from = std::string(d.from, strnlen(d.from, sizeof d.from));
      // The same result this process holds already (a split's parent's, an
      // earlier communicator's) stays one object.
      if (c->probed && c->probed->topo == f->topo && c->probed->tune == f->tune) {
        use = c->probed;
      } else {
        std::lock_guard<std::mutex> lock(gCacheMutex);
        for (const auto& e : gCache)
          if (e->topo == f->topo && e->tune == f->tune) use = e;
      }
      if (!use) {
        HOCCL_TRY(hostsOf(f->topo, f->from, &f->hosts).context("HOCCL_TOPO_PROBE"));
        use = f;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(gCacheMutex);
    bool known = false;
    for (const auto& e : gCache) known = known || e == use;
    if (!known) gCache.push_back(use);
  }
  c->probed = use;
  return Status();
}

}  // namespace hoccl
