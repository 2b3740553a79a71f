#include "base/verbs.h"

#ifdef HOCCL_HAVE_IBVERBS

#include <dlfcn.h>

#include <cstring>
#include <mutex>

namespace hoccl {
namespace {

template <typename Fn>
bool sym(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

}  // namespace

int Verbs::queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const {
  memset(attr, 0, sizeof *attr);
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof *attr);
  return queryPortCompat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

const Verbs* loadVerbs(std::string* why) {
  static std::once_flag once;
  static Verbs verbs;
  static const Verbs* loaded = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = dlerror();
      failure = std::string("libibverbs.so.1 not found (install rdma-core's libibverbs1 and a provider): ") +
                (err ? err : "dlopen failed");
      return;
    }
    Verbs& v = verbs;
    std::string missing;
    sym(lib, "ibv_get_device_list", &v.getDeviceList, &missing);
    sym(lib, "ibv_free_device_list", &v.freeDeviceList, &missing);
    sym(lib, "ibv_get_device_name", &v.getDeviceName, &missing);
    sym(lib, "ibv_open_device", &v.openDevice, &missing);
    sym(lib, "ibv_close_device", &v.closeDevice, &missing);
    sym(lib, "ibv_query_device", &v.queryDevice, &missing);
    sym(lib, "ibv_query_port", &v.queryPortCompat, &missing);
    sym(lib, "ibv_query_gid", &v.queryGid, &missing);
    sym(lib, "ibv_alloc_pd", &v.allocPd, &missing);
    sym(lib, "ibv_dealloc_pd", &v.deallocPd, &missing);
    sym(lib, "ibv_reg_mr", &v.regMr, &missing);
    sym(lib, "ibv_dereg_mr", &v.deregMr, &missing);
    sym(lib, "ibv_create_comp_channel", &v.createCompChannel, &missing);
    sym(lib, "ibv_destroy_comp_channel", &v.destroyCompChannel, &missing);
    sym(lib, "ibv_create_cq", &v.createCq, &missing);
    sym(lib, "ibv_destroy_cq", &v.destroyCq, &missing);
    sym(lib, "ibv_get_cq_event", &v.getCqEvent, &missing);
    sym(lib, "ibv_ack_cq_events", &v.ackCqEvents, &missing);
    sym(lib, "ibv_create_qp", &v.createQp, &missing);
    sym(lib, "ibv_modify_qp", &v.modifyQp, &missing);
    sym(lib, "ibv_destroy_qp", &v.destroyQp, &missing);
    sym(lib, "ibv_wc_status_str", &v.wcStatusStr, &missing);
    if (!missing.empty()) {
      failure = "libibverbs.so.1 lacks " + missing;
      return;
    }
    v.regDmabufMr = reinterpret_cast<decltype(v.regDmabufMr)>(dlsym(lib, "ibv_reg_dmabuf_mr"));
    loaded = &verbs;
  });
  if (!loaded && why) *why = failure;
  return loaded;
}

}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
