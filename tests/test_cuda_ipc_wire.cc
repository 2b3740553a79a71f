// The exported-buffer message (transport/p2p/ipc_wire.h): a valid message
// decodes to itself; each planted corruption is refused with an error that
// names the field.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "transport/p2p/ipc_wire.h"

namespace hoccl::cuda {
namespace {

IpcBufferMsg valid() {
  IpcBufferMsg m;
  m.granularity = 2 << 20;
  m.size = 6 << 20;
  m.connOffset = 0;
  m.connBytes = 256;
  m.slotsOffset = 4096;
  m.slotsBytes = 4 << 20;
  m.from = 1;
  m.to = 0;
  m.link = 2;
  m.pid = 4242;
  std::strcpy(m.host, "node7");
  return m;
}

Status decode(const IpcBufferMsg& m, IpcBufferMsg* out, int nranks = 4) {
  const std::string bytes = encodeIpcBuffer(m);
  return decodeIpcBuffer(bytes.data(), bytes.size(), nranks, out);
}

TEST(IpcWire, ValidMessagesRoundTrip) {
  IpcBufferMsg out;
  const IpcBufferMsg m = valid();
  ASSERT_TRUE(decode(m, &out).ok()) << decode(m, &out).message();
  EXPECT_EQ(std::memcmp(&m, &out, sizeof m), 0);
  IpcBufferMsg fabric = valid();
  fabric.handleType = uint16_t(IpcHandle::Fabric);
  fabric.handle[63] = 9;
  ASSERT_TRUE(decode(fabric, &out).ok());
  EXPECT_EQ(out.handle[63], 9);
  IpcBufferMsg shm = valid();  // a staged connection's memfd: the fd beside it, no handle bytes
  shm.handleType = uint16_t(IpcHandle::HostShm);
  shm.granularity = 4096;
  ASSERT_TRUE(decode(shm, &out).ok()) << decode(shm, &out).message();
  EXPECT_EQ(out.handleType, uint16_t(IpcHandle::HostShm));
  IpcBufferMsg edge = valid();  // slots right after the DevConnMem, to the last byte
  edge.slotsOffset = 256;
  edge.slotsBytes = edge.size - 256;
  EXPECT_TRUE(decode(edge, &out).ok()) << decode(edge, &out).message();
}

struct Corruption {
  const char* name;
  std::function<void(IpcBufferMsg*)> plant;
  const char* says;  // in the error
};

TEST(IpcWire, EveryPlantedCorruptionIsRefusedNamingTheField) {
  const std::vector<Corruption> cases = {
      {"magic", [](IpcBufferMsg* m) { m->magic ^= 1; }, "magic 0x43504949"},
      {"version", [](IpcBufferMsg* m) { m->version = 2; }, "version 2"},
      {"handle type 0", [](IpcBufferMsg* m) { m->handleType = 0; }, "handleType 0"},
      {"handle type 5", [](IpcBufferMsg* m) { m->handleType = 5; }, "handleType 5"},
      {"granularity 0", [](IpcBufferMsg* m) { m->granularity = 0; }, "granularity 0 is not a power of two"},
      {"granularity 3", [](IpcBufferMsg* m) { m->granularity = 3 << 20; }, "granularity 3145728"},
      {"size 0", [](IpcBufferMsg* m) { m->size = 0; }, "size 0"},
      {"size huge", [](IpcBufferMsg* m) { m->size = uint64_t(1) << 41; }, "is 0 or above"},
      {"size vs granularity", [](IpcBufferMsg* m) { m->size += 4096; }, "not a multiple of granularity"},
      {"conn alignment", [](IpcBufferMsg* m) { m->connOffset = 8; }, "connOffset 8 is not 64-byte aligned"},
      {"conn empty", [](IpcBufferMsg* m) { m->connBytes = 0; }, "connBytes 0"},
      {"conn beyond", [](IpcBufferMsg* m) { m->connOffset = m->size - 64; }, "beyond size"},
      {"conn wraps", [](IpcBufferMsg* m) { m->connBytes = ~uint64_t(0) - 10; }, "connBytes"},
      {"slots alignment", [](IpcBufferMsg* m) { m->slotsOffset = 4100; }, "slotsOffset 4100 is not 16-byte"},
      {"slots empty", [](IpcBufferMsg* m) { m->slotsBytes = 0; }, "slotsBytes 0"},
      {"slots beyond", [](IpcBufferMsg* m) { m->slotsBytes = m->size; }, "beyond size"},
      {"slots wrap", [](IpcBufferMsg* m) { m->slotsOffset = ~uint64_t(15); }, "slotsOffset"},
      {"overlap", [](IpcBufferMsg* m) { m->slotsOffset = 128; }, "overlaps the DevConnMem"},
      {"overlap before", [](IpcBufferMsg* m) { m->connOffset = 8192; m->slotsOffset = 0; m->slotsBytes = 8256; },
       "overlaps the DevConnMem"},
      {"from", [](IpcBufferMsg* m) { m->from = 4; }, "edge from 4 to 0"},
      {"to", [](IpcBufferMsg* m) { m->to = -1; }, "edge from 1 to -1"},
      {"self edge", [](IpcBufferMsg* m) { m->to = 1; }, "edge from 1 to 1"},
      {"link", [](IpcBufferMsg* m) { m->link = -3; }, "link -3"},
      {"pid", [](IpcBufferMsg* m) { m->pid = 0; }, "pid 0"},
      {"host", [](IpcBufferMsg* m) { std::memset(m->host, 'h', sizeof m->host); }, "host is not NUL-terminated"},
      {"fd with handle bytes", [](IpcBufferMsg* m) { m->handle[5] = 1; }, "handle bytes are set for a posix-fd"},
      {"host-shm with handle bytes",
       [](IpcBufferMsg* m) {
         m->handleType = uint16_t(IpcHandle::HostShm);
         m->handle[0] = 1;
       },
       "handle bytes are set for a host-shm"},
      {"fabric without handle", [](IpcBufferMsg* m) { m->handleType = uint16_t(IpcHandle::Fabric); },
       "all zeros for a fabric handle"},
  };
  for (const Corruption& c : cases) {
    IpcBufferMsg m = valid(), out;
    c.plant(&m);
    const Status st = decode(m, &out);
    ASSERT_FALSE(st.ok()) << c.name << " was accepted";
    EXPECT_EQ(st.code(), hocclRemoteError) << c.name;
    EXPECT_NE(st.message().find("ipc buffer message: "), std::string::npos) << c.name << ": " << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.name << ": " << st.message();
  }
}

TEST(IpcWire, WrongLengthIsRefused) {
  const std::string bytes = encodeIpcBuffer(valid());
  IpcBufferMsg out;
  for (size_t n : {size_t(0), bytes.size() - 1}) {
    const Status st = decodeIpcBuffer(bytes.data(), n, 4, &out);
    EXPECT_NE(st.message().find(std::to_string(n) + " bytes, expected 200"), std::string::npos) << st.message();
  }
  const std::string longer = bytes + "x";
  EXPECT_FALSE(decodeIpcBuffer(longer.data(), longer.size(), 4, &out).ok());
}

}  // namespace
}  // namespace hoccl::cuda
