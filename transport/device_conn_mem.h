// The memory of one device connection, as the interpreter kernel
// (src/exec/cuda/interp.h) and every device transport see it: the one
// thing both sides of transport/device_connection.h must agree on bit for
// bit. A transport decides where this memory lives (the receiver's GPU,
// host memory both GPUs map, later a proxy's half in host memory) and the
// kernel only follows the counters, so neither knows the other.
//
// One direction of one link between two ranks: kDevSlots slots of
// slotBytes, `tail` (messages posted, written by the sender) and `head`
// (messages released, written by the receiver). Message k sits in slot
// k % kDevSlots with header[k % kDevSlots]. Counters only grow, across
// launches, so nothing is reset between calls.
//
// Compiled by nvcc and g++ alike (HOCCL_HD): no standard library beyond
// fixed-width integers.
#pragma once

#include <cstdint>

#include "base/hd.h"

namespace hoccl::cuda {

inline constexpr uint32_t kDevSlots = 8;

// Bytes of each slot for a communicator's slice (HOCCL_SLICE_BYTES) and
// HOCCL_SLOTS: at least kMinDeviceSlot, since each message costs a wait on
// the peer and two barriers of the CTA, which a small slot does not
// amortize (on an H100, 4 ranks, 256 MiB: 128 KiB slots 140 GB/s busbw,
// 512 KiB 190); at least what `slots` slices spread over kDevSlots need (a
// schedule's step carries up to slots/2 slices); a multiple of 16.
inline constexpr uint64_t kMinDeviceSlot = uint64_t(512) << 10;
inline constexpr uint64_t deviceSlotBytes(uint64_t sliceBytes, int slots) {
  uint64_t slot = sliceBytes > kMinDeviceSlot ? sliceBytes : kMinDeviceSlot;
  if (slots > int(kDevSlots)) {
    const uint64_t spread = (sliceBytes * uint64_t(slots) + kDevSlots - 1) / kDevSlots;
    if (spread > slot) slot = spread;
  }
  return (slot + 15) & ~uint64_t(15);
}

struct DevSlotHeader {
  uint64_t call;   // the call's hash (every rank's must agree)
  uint32_t bytes;  // payload bytes
  uint32_t seq;    // the message's position on its connection (low 32 bits)
};
static_assert(sizeof(DevSlotHeader) == 16, "DevSlotHeader layout");

struct alignas(64) DevConnMem {
  uint64_t tail;  // messages posted (sender writes, release)
  // Nonzero once the transport knows that no message will arrive past
  // `tail`, and no slot will be freed past `head`, because the other end
  // went away in order (a network peer that closed its connection):
  // written after the last `tail` it publishes (release). A kernel that
  // waits on this connection then fails at once instead of at its timeout.
  uint32_t closed;
  uint8_t pad0[52];
  uint64_t head;  // messages released (receiver writes, release)
  uint8_t pad1[56];
  DevSlotHeader header[kDevSlots];
  // kDevSlots slots of slotBytes each lie dataOffset bytes from this
  // DevConnMem (modulo 2^64): an offset, not a pointer, because ranks in
  // different processes map one connection at different addresses, the
  // slots at the same distance; and so that a transport may put the slots
  // in another allocation than the counters.
  uint64_t dataOffset;
  uint64_t slotBytes;  // a multiple of 16
  HOCCL_HD uint8_t* slots() const {
    return reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(this) + dataOffset);
  }
};

// Which connection: the messages rank `from` sends rank `to` on link
// `link` (a plan's connection; both ends' plans name the same one).
struct DeviceEdge {
  int from = 0, to = 0, link = 0;
};

}  // namespace hoccl::cuda
