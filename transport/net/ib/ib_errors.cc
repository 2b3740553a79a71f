// Failed work completions, told so that someone can act on them: the
// status by name and in words, the vendor error, which work it was, the QP
// and its peer (device, host, pid), both GIDs, and what to check.
#include <cstdio>

#include "transport/net/ib/ib_net.h"
#include "transport/net/ib/ib_select.h"

#ifdef HOCCL_HAVE_IBVERBS

namespace hoccl {
namespace ibnet {
namespace {

const char* statusName(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "IBV_WC_SUCCESS";
    case IBV_WC_LOC_LEN_ERR: return "IBV_WC_LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR: return "IBV_WC_LOC_QP_OP_ERR";
    case IBV_WC_LOC_EEC_OP_ERR: return "IBV_WC_LOC_EEC_OP_ERR";
    case IBV_WC_LOC_PROT_ERR: return "IBV_WC_LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR: return "IBV_WC_WR_FLUSH_ERR";
    case IBV_WC_MW_BIND_ERR: return "IBV_WC_MW_BIND_ERR";
    case IBV_WC_BAD_RESP_ERR: return "IBV_WC_BAD_RESP_ERR";
    case IBV_WC_LOC_ACCESS_ERR: return "IBV_WC_LOC_ACCESS_ERR";
    case IBV_WC_REM_INV_REQ_ERR: return "IBV_WC_REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR: return "IBV_WC_REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR: return "IBV_WC_REM_OP_ERR";
    case IBV_WC_RETRY_EXC_ERR: return "IBV_WC_RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "IBV_WC_RNR_RETRY_EXC_ERR";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "IBV_WC_LOC_RDD_VIOL_ERR";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "IBV_WC_REM_INV_RD_REQ_ERR";
    case IBV_WC_REM_ABORT_ERR: return "IBV_WC_REM_ABORT_ERR";
    case IBV_WC_INV_EECN_ERR: return "IBV_WC_INV_EECN_ERR";
    case IBV_WC_INV_EEC_STATE_ERR: return "IBV_WC_INV_EEC_STATE_ERR";
    case IBV_WC_FATAL_ERR: return "IBV_WC_FATAL_ERR";
    case IBV_WC_RESP_TIMEOUT_ERR: return "IBV_WC_RESP_TIMEOUT_ERR";
    case IBV_WC_GENERAL_ERR: return "IBV_WC_GENERAL_ERR";
    default: return "IBV_WC_(unknown)";
  }
}

std::string hint(ibv_wc_status s, const IbNetOptions& opt, const Device& dev) {
  char buf[400];
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
      snprintf(buf, sizeof buf,
               "the peer did not acknowledge in time: it may have exited, or the path is down or lossy; check "
               "both ports with ibv_devinfo (state, GIDs), or allow more time with HOCCL_IB_TIMEOUT (now %d: "
               "4.096 us x 2^%d per try) and HOCCL_IB_RETRY_CNT (now %d)",
               opt.timeout, opt.timeout, opt.retryCnt);
      return buf;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer had no receive posted for an immediate: it may be stuck or gone";
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return "a buffer was used outside its registration: was it freed or deregistered while a transfer was "
             "in flight?";
    case IBV_WC_WR_FLUSH_ERR:
      return "the queue pair had already failed; an earlier completion holds the cause";
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
      return "the peer rejected the request: do both sides run the same hoccl version?";
    default:
      snprintf(buf, sizeof buf, "check %s with ibv_devinfo and the kernel log (dmesg)", dev.name.c_str());
      return buf;
  }
}

}  // namespace

std::string completionError(const Verbs& v, const IbNetOptions& opt, const Comm& c, const ibv_wc& wc, int qp) {
  const char* work = (wc.wr_id & kFifoWr) ? "an RDMA write of a receive-buffer announcement (FIFO entry)"
                     : wc.wr_id < static_cast<uint64_t>(kMaxQps) ? "a posted receive"
                                                                 : "an RDMA write of message data";
  char buf[1400];
  snprintf(buf, sizeof buf,
           "IB transport: %s on %s failed: %s (\"%s\", status %d), vendor_err %#x; QP %#x (%d of %zu) to remote "
           "QP %#x, peer %s; local GID %s (index %d), remote GID %s (index %d); hint: %s",
           work, c.dev->name.c_str(), statusName(wc.status), v.wcStatusStr(wc.status), static_cast<int>(wc.status),
           wc.vendor_err, wc.qp_num, qp + 1, c.qps.size(), qp >= 0 ? c.remote.qpn[qp] : 0, c.peer.c_str(),
           gidText(c.dev->gid.raw).c_str(), c.dev->gidIndex, gidText(c.remote.gid).c_str(), c.remote.gidIndex,
           hint(wc.status, opt, *c.dev).c_str());
  return buf;
}

}  // namespace ibnet
}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
