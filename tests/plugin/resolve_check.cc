// Name resolution and symbol lookup exactly as NCCL does them, checked
// against our two libraries: NCCL_NET_PLUGIN=hoccl through LD_LIBRARY_PATH,
// absolute paths, the lib*.so form, comma lists, misses, the tuner's
// fallback to the net plugin's library, and which version each NCCL
// release would pick.
#include "tests/plugin/resolve_check.h"

#include <dlfcn.h>

#include <cstring>

#include "hoccl_nccl/net.h"
#include "hoccl_nccl/tuner.h"
#include "tests/plugin/check.h"
#include "tests/plugin/loader.h"

namespace pluginharness {
namespace {

// The symbol range each NCCL release looks up (NCCL-PLUGIN-ABI.md, and the
// strings in libnccl.so 2.28.9).
struct Release {
  const char* name;
  int netNewest, netOldest, tunerNewest, tunerOldest;
};
const Release kReleases[] = {
    {"2.30", 12, 6, 6, 2}, {"2.28-2.29", 11, 6, 5, 2}, {"2.26-2.27", 10, 6, 4, 2},
    {"2.24-2.25", 9, 6, 4, 2}, {"2.22-2.23", 8, 6, 3, 2},
};

bool expectOpen(PluginType t, const std::string& name, const std::string& openedAs, size_t tries) {
  Opened o = openPluginLib(t, name);
  bool ok = EXPECT(o.handle, "'%s' did not resolve (%s)", name.c_str(), o.error.c_str()) &&
            EXPECT(o.openedName == openedAs, "'%s' opened as '%s', NCCL opens '%s'", name.c_str(),
                   o.openedName.c_str(), openedAs.c_str()) &&
            EXPECT(o.tried.size() == tries, "'%s': %zu dlopen calls, NCCL makes %zu", name.c_str(), o.tried.size(), tries);
  if (o.handle) dlclose(o.handle);
  if (ok) notef("'%s' -> %s (%zu dlopen call%s)", name.c_str(), openedAs.c_str(), tries, tries > 1 ? "s" : "");
  return ok;
}

bool expectMiss(PluginType t, const std::string& name, std::vector<std::string> tried) {
  Opened o = openPluginLib(t, name);
  if (o.handle) dlclose(o.handle);
  return EXPECT(!o.handle, "'%s' resolved to %s", name.c_str(), o.openedName.c_str()) &&
         EXPECT(o.tried == tried, "'%s': tried %zu names, NCCL tries %zu", name.c_str(), o.tried.size(), tried.size());
}

}  // namespace

int runResolveCheck(const std::string& pluginDir) {
  logPrefix = "[resolve] ";
  const std::string net = "libnccl-net-hoccl.so", tuner = "libnccl-tuner-hoccl.so";
  const char* ldPath = getenv("LD_LIBRARY_PATH");
  bool viaLdPath = ldPath && strstr(ldPath, pluginDir.c_str());
  if (!EXPECT(viaLdPath, "LD_LIBRARY_PATH must hold %s for this check", pluginDir.c_str())) return 1;

  // NCCL_NET_PLUGIN=hoccl: "hoccl" fails, "libnccl-net-hoccl.so" is found on LD_LIBRARY_PATH.
  expectOpen(PluginType::Net, "hoccl", net, 2);
  expectOpen(PluginType::Net, net, net, 1);
  expectOpen(PluginType::Net, pluginDir + "/" + net, pluginDir + "/" + net, 1);
  expectOpen(PluginType::Tuner, "hoccl", tuner, 2);
  expectOpen(PluginType::Tuner, pluginDir + "/" + tuner, pluginDir + "/" + tuner, 1);
  // Misses: a path or a lib*.so name gets no second try.
  expectMiss(PluginType::Net, "nosuch", {"nosuch", "libnccl-net-nosuch.so"});
  expectMiss(PluginType::Net, "libnccl-net-nosuch.so", {"libnccl-net-nosuch.so"});
  expectMiss(PluginType::Net, pluginDir + "/nosuch", {pluginDir + "/nosuch"});
  expectMiss(PluginType::Tuner, "", {"libnccl-tuner.so"});

  // NCCL_NET_PLUGIN lists (2.27.3+): the first entry that opens and has a
  // net symbol is used.
  EXPECT(netPluginNames(nullptr) == std::vector<std::string>{""}, "unset NCCL_NET_PLUGIN");
  EXPECT(netPluginNames("NONE").empty(), "NCCL_NET_PLUGIN=none");
  std::vector<std::string> list = netPluginNames("nosuch,hoccl");
  if (EXPECT(list.size() == 2, "comma list")) {
    Opened first = openPluginLib(PluginType::Net, list[0]);
    EXPECT(!first.handle, "nosuch opened");
    expectOpen(PluginType::Net, list[1], net, 2);
  }

  // Symbols, newest first, for each NCCL release's range.
  for (const Release& r : kReleases) {
    Opened n = openPluginLib(PluginType::Net, "hoccl");
    Opened t = openPluginLib(PluginType::Tuner, "hoccl");
    if (!EXPECT(n.handle && t.handle, "plugins did not open")) return 1;
    Symbol ns = findNewest(n.handle, "ncclNetPlugin_v", r.netNewest, r.netOldest);
    Symbol ts = findNewest(t.handle, "ncclTunerPlugin_v", r.tunerNewest, r.tunerOldest);
    Symbol nts = findNewest(n.handle, "ncclTunerPlugin_v", r.tunerNewest, r.tunerOldest);
    EXPECT(ns.version == r.netNewest, "NCCL %s: net plugin v%d, expected v%d", r.name, ns.version, r.netNewest);
    EXPECT(ts.version == r.tunerNewest, "NCCL %s: tuner v%d, expected v%d", r.name, ts.version, r.tunerNewest);
    // NCCL reopens the net library when no tuner library opens: same versions there.
    EXPECT(nts.version == r.tunerNewest, "NCCL %s: tuner in the net library v%d", r.name, nts.version);
    if (ns.address)
      EXPECT(strcmp(static_cast<const ncclNet_v8_t*>(ns.address)->name, "hoccl") == 0, "net name");
    notef("NCCL %s would use ncclNetPlugin_v%d and ncclTunerPlugin_v%d", r.name, ns.version, ts.version);
    dlclose(n.handle);
    dlclose(t.handle);
  }
  // A release older than our oldest export finds nothing and moves on.
  Opened n = openPluginLib(PluginType::Net, "hoccl");
  if (n.handle) {
    EXPECT(!findNewest(n.handle, "ncclNetPlugin_v", 7, 6).address, "v6/v7 exported: never tested");
    EXPECT(!findNewest(n.handle, "ncclTunerPlugin_v", 2, 2).address, "tuner v2 exported: never tested");
    dlclose(n.handle);
  }

  // The tuner fallback: NCCL_TUNER_PLUGIN unset, no libnccl-tuner.so, so NCCL
  // re-dlopens the net plugin it loaded (by the name that worked).
  Opened tunerLib = openPluginLib(PluginType::Tuner, "");
  EXPECT(!tunerLib.handle, "a libnccl-tuner.so is on the path: the fallback is not exercised");
  Opened netLib = openPluginLib(PluginType::Net, "hoccl");
  if (netLib.handle) {
    void* again = dlopen(netLib.openedName.c_str(), RTLD_NOW | RTLD_LOCAL);
    Symbol ts = again ? findNewest(again, "ncclTunerPlugin_v", 6, 2) : Symbol();
    EXPECT(ts.version == 6, "tuner through the net library: v%d", ts.version);
    if (ts.address)
      EXPECT(strcmp(static_cast<const ncclTuner_v6_t*>(ts.address)->name, "hoccl") == 0, "tuner name");
    if (again) dlclose(again);
    dlclose(netLib.handle);
    EXPECT(!stillLoaded(netLib.openedName), "net library still mapped after both handles closed");
  }
  notef("%s", failures == 0 ? "resolution: ok" : "resolution: FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace pluginharness
