// GPU flushes for GPUDirect RDMA receives (ib_net.h, postFlush): one RC
// queue pair per device connected to itself. A flush posts an RDMA read of
// one byte of the received buffer into a host byte; PCIe orders that read
// behind the NIC's writes to the same memory, so its completion says the
// data is where the GPU will look for it.
#ifdef HOCCL_HAVE_IBVERBS

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "transport/net/ib/ib_net.h"

namespace hoccl {
namespace ibnet {

namespace {

constexpr int kFlushDepth = 64;

Status flushError(Device* d, const char* what) {
  d->flush.failed = errorf(hocclSystemError, "IB: the GPU flush loopback on %s: %s failed: %s", d->name.c_str(),
                           what, strerror(errno));
  return d->flush.failed;
}

Status openFlush(const Verbs& v, const IbNetOptions& opt, Device* d) {
  Device::Flush& f = d->flush;
  f.cq = v.createCq(d->ctx, kFlushDepth, nullptr, nullptr, 0);
  if (!f.cq) return flushError(d, "ibv_create_cq");
  ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = f.cq;
  ia.recv_cq = f.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = kFlushDepth;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  f.qp = v.createQp(d->pd, &ia);
  if (!f.qp) return flushError(d, "ibv_create_qp");
  f.buf = static_cast<char*>(aligned_alloc(64, 64));
  if (!f.buf) return flushError(d, "allocating the landing byte");
  f.mr = v.regMr(d->pd, f.buf, 64, IBV_ACCESS_LOCAL_WRITE);
  if (!f.mr) return flushError(d, "ibv_reg_mr of the landing byte");

  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = static_cast<uint8_t>(d->port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  if (v.modifyQp(f.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    return flushError(d, "QP to INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = d->attr.active_mtu;
  a.dest_qp_num = f.qp->qp_num;  // itself
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(d->port);
  if (d->attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = d->gid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(d->gidIndex);
    a.ah_attr.grh.hop_limit = 255;
  } else {
    a.ah_attr.dlid = d->attr.lid;
  }
  if (v.modifyQp(f.qp, &a,
                 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return flushError(d, "QP to RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = static_cast<uint8_t>(opt.timeout);
  a.retry_cnt = static_cast<uint8_t>(opt.retryCnt);
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  if (v.modifyQp(f.qp, &a,
                 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                     IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    return flushError(d, "QP to RTS");
  HINFO(kSubNet, "IB: GPU flush loopback on %s (QP %#x)", d->name.c_str(), f.qp->qp_num);
  return Status();
}

}  // namespace

Status postFlush(const Verbs& v, const IbNetOptions& opt, Device* d, const Mr& mr, const void* addr,
                 uint64_t* ticket) {
  Device::Flush& f = d->flush;
  HOCCL_TRY(f.failed);
  if (!f.qp) HOCCL_TRY(openFlush(v, opt, d));
  if (f.posted - f.completed >= kFlushDepth)
    return errorf(hocclInternalError, "IB: %d GPU flushes in flight on %s", kFlushDepth, d->name.c_str());
  ibv_sge sge;
  sge.addr = reinterpret_cast<uint64_t>(f.buf);
  sge.length = 1;
  sge.lkey = f.mr->lkey;
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = f.posted + 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(addr);
  wr.wr.rdma.rkey = mr.mr->rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(f.qp, &wr, &bad) != 0) return flushError(d, "posting the read");
  *ticket = ++f.posted;
  return Status();
}

Status flushDone(const Verbs& v, Device* d, uint64_t ticket, bool* done) {
  Device::Flush& f = d->flush;
  ibv_wc wc[8];
  int n;
  while (f.failed.ok() && (n = ibv_poll_cq(f.cq, 8, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        f.failed = errorf(hocclSystemError, "IB: a GPU flush read on %s failed: %s (vendor error %#x)",
                          d->name.c_str(), v.wcStatusStr(wc[i].status), wc[i].vendor_err);
        break;
      }
      // One QP: reads complete in the order they were posted.
      f.completed = wc[i].wr_id;
    }
  }
  HOCCL_TRY(f.failed);
  *done = f.completed >= ticket;
  return Status();
}

void closeFlush(const Verbs& v, Device* d) {
  Device::Flush& f = d->flush;
  if (f.qp) v.destroyQp(f.qp);
  if (f.cq) v.destroyCq(f.cq);
  if (f.mr) v.deregMr(f.mr);
  free(f.buf);
  f = Device::Flush();
}

bool peerMemoryLoaded() {
  for (const char* p : {"/sys/module/nvidia_peermem", "/sys/module/nv_peer_mem", "/sys/kernel/mm/memory_peers/nv_mem"})
    if (access(p, F_OK) == 0) return true;
  return false;
}

}  // namespace ibnet
}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
