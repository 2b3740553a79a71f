// NVML's answers as the topology and the device path read them
// (src/topo/nvml.h), on a fake NVML (support/fake_nvml.h): NVLink peers
// direct and through NVSwitches, P2P status per pair, and every way NVML
// can fail to answer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/topo/nvml.h"
#include "tests/support/fake_nvml.h"

namespace hoccl {
namespace {

std::vector<topo::GpuInfo> gpusOn(const std::vector<std::string>& buses) {
  std::vector<topo::GpuInfo> gpus;
  for (size_t i = 0; i < buses.size(); ++i) {
    topo::GpuInfo g;
    g.index = int(i);
    g.pciBusId = buses[i];
    gpus.push_back(g);
  }
  return gpus;
}

const std::vector<std::string> kBuses = {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"};

// GPUs 0 and 1 joined by two links (NVML names the far end in its own
// 8-digit domain form), GPUs 2 and 3 each with one link to an NVSwitch;
// P2P refused between 0 and 2 by the chipset.
void fourGpus() {
  fakenvml::install(kBuses);
  fakenvml::State& s = fakenvml::state();
  s.links[0] = {"00000000:02:00.0", "00000000:02:00.0"};
  s.links[1] = {"00000000:01:00.0", "00000000:01:00.0"};
  s.links[2] = {"00000000:A0:00.0"};
  s.links[3] = {"00000000:A1:00.0"};
  s.p2p[{0, 2}] = 1;  // NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED
  s.p2p[{2, 0}] = 1;
}

TEST(Nvml, ProbeFindsNvlinkPeersThroughLinksAndSwitchesAndP2pPerPair) {
  fourGpus();
  std::vector<topo::GpuInfo> gpus = gpusOn(kBuses);
  EXPECT_EQ(topo::probeNvml(topo::processNvml(), &gpus), 6) << "active links";
  EXPECT_EQ(gpus[0].nvlinkPeers, std::vector<int>({1}));
  EXPECT_EQ(gpus[1].nvlinkPeers, std::vector<int>({0}));
  EXPECT_EQ(gpus[2].nvlinkPeers, std::vector<int>({3})) << "both on NVSwitches";
  EXPECT_EQ(gpus[3].nvlinkPeers, std::vector<int>({2}));
  for (const topo::GpuInfo& g : gpus) EXPECT_TRUE(g.p2pProbed) << g.index;
  EXPECT_EQ(gpus[0].p2pPeers, std::vector<int>({1, 3}));
  EXPECT_EQ(gpus[1].p2pPeers, std::vector<int>({0, 2, 3}));
  EXPECT_EQ(gpus[2].p2pPeers, std::vector<int>({1, 3}));
  EXPECT_EQ(gpus[3].p2pPeers, std::vector<int>({0, 1, 2}));
  EXPECT_EQ(fakenvml::state().sessions, 0) << "every nvmlInit_v2 has its nvmlShutdown";
  fakenvml::uninstall();
}

TEST(Nvml, AGpuNvmlDoesNotKnowAndAnNvmlWithoutP2pStatusLeaveP2pUnprobed) {
  fourGpus();
  std::vector<topo::GpuInfo> gpus = gpusOn({kBuses[0], kBuses[1], "0000:99:00.0"});
  topo::probeNvml(topo::processNvml(), &gpus);
  EXPECT_TRUE(gpus[0].p2pProbed);
  EXPECT_EQ(gpus[0].p2pPeers, std::vector<int>({1})) << "GPU 2 is unknown to NVML: no P2P claimed";
  EXPECT_FALSE(gpus[2].p2pProbed);
  EXPECT_TRUE(gpus[2].nvlinkPeers.empty());
  const topo::NvmlApi noP2p = fakenvml::api(false);
  gpus = gpusOn(kBuses);
  EXPECT_EQ(topo::probeNvml(noP2p, &gpus), 6);
  EXPECT_EQ(gpus[0].nvlinkPeers, std::vector<int>({1}));
  for (const topo::GpuInfo& g : gpus) EXPECT_FALSE(g.p2pProbed) << g.index;
  fakenvml::uninstall();
}

TEST(Nvml, P2pWriteSaysYesNoWithNvmlsReasonOrWhyItCannotTell) {
  fourGpus();
  const topo::NvmlApi& nvml = topo::processNvml();
  EXPECT_EQ(topo::p2pWrite(nvml, kBuses[0], kBuses[1]).kind, topo::P2pAnswer::Yes);
  const topo::P2pAnswer no = topo::p2pWrite(nvml, kBuses[0], "0000:03:00.0");
  EXPECT_EQ(no.kind, topo::P2pAnswer::No);
  EXPECT_NE(no.why.find("NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED"), std::string::npos) << no.why;
  fakenvml::state().p2p[{1, 3}] = 3;
  const topo::P2pAnswer ioh = topo::p2pWrite(nvml, "0000:02:00.0", "0000:04:00.0");
  EXPECT_NE(ioh.why.find("IOH_TOPOLOGY"), std::string::npos) << ioh.why;
  const topo::P2pAnswer unknownGpu = topo::p2pWrite(nvml, kBuses[0], "0000:99:00.0");
  EXPECT_EQ(unknownGpu.kind, topo::P2pAnswer::Unknown);
  EXPECT_NE(unknownGpu.why.find("NVML does not know GPU 0000:99:00.0"), std::string::npos) << unknownGpu.why;
  const topo::P2pAnswer noEntry = topo::p2pWrite(fakenvml::api(false), kBuses[0], kBuses[1]);
  EXPECT_EQ(noEntry.kind, topo::P2pAnswer::Unknown);
  EXPECT_NE(noEntry.why.find("nvmlDeviceGetP2PStatus"), std::string::npos) << noEntry.why;
  fakenvml::state().initRc = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  const topo::P2pAnswer noInit = topo::p2pWrite(nvml, kBuses[0], kBuses[1]);
  EXPECT_EQ(noInit.kind, topo::P2pAnswer::Unknown);
  EXPECT_NE(noInit.why.find("nvmlInit_v2 returned 9"), std::string::npos) << noInit.why;
  std::vector<topo::GpuInfo> gpus = gpusOn(kBuses);
  EXPECT_EQ(topo::probeNvml(nvml, &gpus), 0) << "no session, no answers";
  EXPECT_FALSE(gpus[0].p2pProbed);
  EXPECT_EQ(fakenvml::state().sessions, 0);
  fakenvml::uninstall();
}

// This machine's NVML, or its absence: with none, the answer says why
// (no library here), and the probe claims nothing.
TEST(Nvml, WithoutALibraryTheAnswerSaysWhy) {
  topo::NvmlApi none;
  none.status = "libnvidia-ml.so.1 not found (test)";
  const topo::P2pAnswer a = topo::p2pWrite(none, kBuses[0], kBuses[1]);
  EXPECT_EQ(a.kind, topo::P2pAnswer::Unknown);
  EXPECT_EQ(a.why, "no NVML: libnvidia-ml.so.1 not found (test)");
  std::vector<topo::GpuInfo> gpus = gpusOn(kBuses);
  EXPECT_EQ(topo::probeNvml(none, &gpus), 0);
  EXPECT_FALSE(gpus[0].p2pProbed);
  const topo::NvmlApi& real = topo::processNvml();
  EXPECT_TRUE(real.usable() || !real.status.empty()) << "an NVML that cannot be used says why";
}

}  // namespace
}  // namespace hoccl
