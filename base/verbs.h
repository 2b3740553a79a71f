// libibverbs, loaded at run time: hoccl never links it, so it builds and runs
// where rdma-core is absent. Used by the verbs transport (transport/net/ib)
// and by device discovery (src/topo), so it sits in the bottom layer. The exported calls are looked up with dlsym;
// the data-path calls (post_send, post_recv, poll_cq, req_notify_cq) are
// inline in verbs.h and go through the provider's ops table, so they need
// no symbol. Types come from <infiniband/verbs.h>; only built when those
// headers exist (HOCCL_HAVE_IBVERBS).
#pragma once

#ifdef HOCCL_HAVE_IBVERBS

#include <infiniband/verbs.h>

#include <string>

namespace hoccl {

struct Verbs {
  ibv_device** (*getDeviceList)(int*);
  void (*freeDeviceList)(ibv_device**);
  const char* (*getDeviceName)(ibv_device*);
  ibv_context* (*openDevice)(ibv_device*);
  int (*closeDevice)(ibv_context*);
  int (*queryDevice)(ibv_context*, ibv_device_attr*);
  int (*queryPortCompat)(ibv_context*, uint8_t, _compat_ibv_port_attr*);
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*);
  ibv_pd* (*allocPd)(ibv_context*);
  int (*deallocPd)(ibv_pd*);
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int);
  int (*deregMr)(ibv_mr*);
  ibv_comp_channel* (*createCompChannel)(ibv_context*);
  int (*destroyCompChannel)(ibv_comp_channel*);
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroyCq)(ibv_cq*);
  int (*getCqEvent)(ibv_comp_channel*, ibv_cq**, void**);
  void (*ackCqEvents)(ibv_cq*, unsigned);
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*);
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int);
  int (*destroyQp)(ibv_qp*);
  const char* (*wcStatusStr)(ibv_wc_status);
  // Optional (rdma-core 34 and later; null when the library lacks it):
  // registering a dma-buf, GPU memory the NIC reads and writes directly.
  ibv_mr* (*regDmabufMr)(ibv_pd*, uint64_t offset, size_t length, uint64_t iova, int fd, int access);

  // What verbs.h's inline ibv_query_port does: the extended context's op
  // when the provider has one, else the compat symbol.
  int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const;
};

// The loaded library, or nullptr with `why` saying what is missing. Loaded
// once per process and kept: providers do not expect to be unloaded.
const Verbs* loadVerbs(std::string* why);

}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
