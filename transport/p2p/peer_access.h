// Peer access between GPUs and its self-test (HOCCL_P2P_CHECK): what
// decides whether one rank's kernels may write into another rank's GPU
// memory directly, or must stage through host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/cuda_device_api.h"
#include "base/error.h"

namespace hoccl::cuda {

// Lets the current context (device `device`'s) reach the memory of every
// device in `peers` (ordinals of this process, none equal to `device`):
// cuDeviceCanAccessPeer, then cuCtxEnablePeerAccess on the peer's primary
// context, retained here and appended to *retained for the caller to
// release (already enabled counts as done). With `selfTest`, each pair
// then passes peerSelfTest. A peer the driver gives no peer access to, or
// whose test fails, goes in *unreachable with the reason (its connections
// stage through host memory); a driver call that fails is an error.
Status enablePeerAccess(const DeviceApi& api, int device, const std::vector<int>& peers, bool selfTest,
                        std::vector<int>* retained, std::map<int, std::string>* unreachable);

// The peer-access self-test (HOCCL_P2P_CHECK): with the current context
// (device `device`'s), copies a 64 KiB pattern into memory of `peer`'s
// context `peerCtx` and back, and compares it on the host. "" if it came
// back intact; else why not: the data differs (an ACS/IOMMU setting can
// let peer access be enabled and still lose or misroute the writes), the
// copies did not finish within `waitSec`, or a driver call failed.
std::string peerSelfTest(const DeviceApi& api, int device, int peer, CuHandle peerCtx, double waitSec = 5);

// The test itself, on memory of the peer's GPU already mapped here at
// `remote` (kRoundTripBytes of it; a peer process's memory imported with
// VMM or legacy IPC, p2p_paths.cc): a pattern made from `seed` copied
// there and back with the current context, and compared. "" if intact,
// else why not, as peerSelfTest. *stuck: the copies did not finish, so
// their memory was leaked rather than freed (the caller must not free
// `remote` either).
inline constexpr size_t kRoundTripBytes = size_t(64) << 10;
std::string copyRoundTrip(const DeviceApi& api, DevPtr remote, uint32_t seed, double waitSec, bool* stuck);

}  // namespace hoccl::cuda
