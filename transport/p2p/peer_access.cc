// Peer access and its self-test (peer_access.h).
#include "transport/p2p/peer_access.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace hoccl::cuda {

Status enablePeerAccess(const DeviceApi& api, int device, const std::vector<int>& peers, bool selfTest,
                        std::vector<int>* retained, std::map<int, std::string>* unreachable) {
  constexpr int kAlreadyEnabled = 704;  // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
  for (int peer : peers) {
    int can = 0;
    HOCCL_TRY(cuCheck(api.deviceCanAccessPeer(&can, device, peer), "cuDeviceCanAccessPeer"));
    if (!can) {
      (*unreachable)[peer] = "cuDeviceCanAccessPeer says GPU " + std::to_string(device) + " has no peer access to GPU " +
                             std::to_string(peer) + " (no NVLink or PCIe peer path, or ACS/IOMMU forbids it)";
      continue;
    }
    CuHandle peerCtx = nullptr;
    HOCCL_TRY(cuCheck(api.devicePrimaryCtxRetain(&peerCtx, peer), "cuDevicePrimaryCtxRetain(peer GPU)"));
    retained->push_back(peer);
    const int rc = api.ctxEnablePeerAccess(peerCtx, 0);
    if (rc != kCudaSuccess && rc != kAlreadyEnabled) {
      (*unreachable)[peer] = "cuCtxEnablePeerAccess(GPU " + std::to_string(device) + " to GPU " + std::to_string(peer) +
                             ") failed: " + resultName(rc);
      continue;
    }
    const std::string failed = selfTest ? peerSelfTest(api, device, peer, peerCtx) : "";
    if (!failed.empty())
      (*unreachable)[peer] = "the peer-access self-test from GPU " + std::to_string(device) + " to GPU " +
                             std::to_string(peer) + " failed: " + failed + " (HOCCL_P2P_CHECK=0 skips the test)";
  }
  return Status();
}

std::string peerSelfTest(const DeviceApi& api, int device, int peer, CuHandle peerCtx, double waitSec) {
  CuHandle mine = nullptr;
  DevPtr remote = 0;
  std::string why;
  int rc = api.ctxGetCurrent(&mine);
  if (rc != kCudaSuccess) return std::string("cuCtxGetCurrent: ") + resultName(rc);
  rc = api.ctxSetCurrent(peerCtx);
  if (rc == kCudaSuccess) {
    rc = api.memAlloc(&remote, kRoundTripBytes);
    if (rc != kCudaSuccess) why = std::string("cuMemAlloc on the peer GPU: ") + resultName(rc);
  } else {
    why = std::string("cuCtxSetCurrent(peer GPU): ") + resultName(rc);
  }
  rc = api.ctxSetCurrent(mine);
  if (why.empty() && rc != kCudaSuccess) why = std::string("cuCtxSetCurrent: ") + resultName(rc);
  bool stuck = false;
  if (why.empty()) why = copyRoundTrip(api, remote, uint32_t(device << 20 | peer << 8), waitSec, &stuck);
  if (!stuck && remote && api.ctxSetCurrent(peerCtx) == kCudaSuccess) {  // stuck: leaked, not freed
    api.memFree(remote);
    api.ctxSetCurrent(mine);
  }
  return why;
}

std::string copyRoundTrip(const DeviceApi& api, DevPtr remote, uint32_t seed, double waitSec, bool* stuck) {
  constexpr size_t kWords = kRoundTripBytes / sizeof(uint32_t);
  std::vector<uint32_t> pattern(kWords), back(kWords, 0);
  for (size_t i = 0; i < kWords; ++i) pattern[i] = uint32_t(i) * 2654435761u ^ seed;
  CuHandle stream = nullptr;
  DevPtr local = 0;  // the pattern, then what came back
  std::string why;
  auto call = [&](int rc, const char* what) {
    if (rc != kCudaSuccess && why.empty()) why = std::string(what) + ": " + resultName(rc);
    return why.empty();
  };
  bool done = false;
  *stuck = false;  // the copies may still run, so nothing is freed
  if (call(api.memAlloc(&local, 2 * kRoundTripBytes), "cuMemAlloc") &&
      call(api.streamCreate(&stream, kStreamNonBlocking), "cuStreamCreate") &&
      call(api.memcpyHtoDAsync(local, pattern.data(), kRoundTripBytes, stream), "cuMemcpyHtoDAsync") &&
      call(api.memsetD8Async(local + kRoundTripBytes, 0, kRoundTripBytes, stream), "cuMemsetD8Async") &&
      call(api.memcpyDtoDAsync(remote, local, kRoundTripBytes, stream), "cuMemcpyDtoDAsync(to the peer GPU)") &&
      call(api.memcpyDtoDAsync(local + kRoundTripBytes, remote, kRoundTripBytes, stream),
           "cuMemcpyDtoDAsync(from the peer GPU)")) {
    // Polled, not synchronized: a peer path that swallows the copy must not
    // hang the communicator's setup.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(waitSec);
    int rc = kCudaErrorNotReady;
    while ((rc = api.streamQuery(stream)) == kCudaErrorNotReady && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    *stuck = rc == kCudaErrorNotReady;
    if (*stuck)
      why = "the copies did not finish in " + std::to_string(int(waitSec)) + " s";
    else if (call(rc, "cuStreamQuery") &&
             call(api.memcpyDtoHAsync(back.data(), local + kRoundTripBytes, kRoundTripBytes, stream),
                  "cuMemcpyDtoHAsync") &&
             call(api.streamSynchronize(stream), "cuStreamSynchronize"))
      done = true;
  }
  if (done) {
    size_t bad = 0, first = kWords;
    for (size_t i = 0; i < kWords; ++i)
      if (back[i] != pattern[i]) {
        ++bad;
        first = std::min(first, i);
      }
    if (bad)
      why = "of " + std::to_string(kWords) + " words copied to the peer GPU and back, " + std::to_string(bad) +
            " came back different (the first at word " + std::to_string(first) + ")";
  }
  if (*stuck) return why;
  if (stream) api.streamDestroy(stream);
  if (local) api.memFree(local);
  return why;
}

}  // namespace hoccl::cuda
