// ProcessGroupHoccl's methods (how torch.distributed's calls become hoccl
// calls) and its Python module hoccl_torch._C. How queued work runs (the
// worker, its Works, per-call timeouts) is in work_queue.cc.
#include "process_group_hoccl.h"
#include "tensors.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>  // c10::intrusive_ptr as a pybind11 holder

namespace hoccl_torch {

using c10d::OpType;

namespace {
// The op type of a coalesced call's Work (torch 1.13 has no COALESCED).
#if HOCCL_TORCH2
constexpr OpType kCoalescedOp = OpType::COALESCED;
#else
constexpr OpType kCoalescedOp = OpType::UNKNOWN;
#endif
}  // namespace

ProcessGroupHoccl::ProcessGroupHoccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     double timeoutSec, std::string groupName, std::string algorithm)
    : BaseGroup(rank, size), groupName_(std::move(groupName)), algorithm_(std::move(algorithm)) {
  // hoccl takes whole milliseconds: at least 1 (NaN too), at most what an
  // int holds (24 days; torch's default is 30 minutes).
  const double ms = std::ceil(timeoutSec * 1000);
  timeoutMs_ = ms >= INT_MAX ? INT_MAX : ms >= 1 ? static_cast<int>(ms) : 1;
  hocclUniqueId id;
  const std::string key = "hoccl/unique_id";
  if (rank == 0) {
    check(hocclGetUniqueId(&id), "hocclGetUniqueId");
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id));
    store->set(key, bytes);
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    if (bytes.size() != sizeof(id))
      fail("the unique id in the store has " + std::to_string(bytes.size()) + " bytes, not " +
           std::to_string(sizeof(id)) + " (another library's key?)");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMs_;
  config.commName = groupName_.c_str();
  if (!algorithm_.empty()) config.algorithm = algorithm_.c_str();
  check(hocclCommInitRankConfig(&comm_, size, id, rank, &config), "hocclCommInitRankConfig");
  startWorker();
}

namespace {
int commRank(hocclComm_t comm) {
  int r = 0;
  hocclCommUserRank(comm, &r);
  return r;
}
int commSize(hocclComm_t comm) {
  int n = 0;
  hocclCommCount(comm, &n);
  return n;
}
}  // namespace

ProcessGroupHoccl::ProcessGroupHoccl(hocclComm_t comm, int timeoutMs, std::string groupName, std::string algorithm,
                                     std::string origin)
    : BaseGroup(commRank(comm), commSize(comm)),
      comm_(comm),
      timeoutMs_(timeoutMs),
      groupName_(std::move(groupName)),
      algorithm_(std::move(algorithm)),
      origin_(std::move(origin)) {
  startWorker();
}

c10::intrusive_ptr<ProcessGroupHoccl> ProcessGroupHoccl::split(int color, int key, const std::string& groupName) {
  auto made = std::make_shared<hocclComm_t>(nullptr);
  auto name = std::make_shared<std::string>(groupName);
  auto work = enqueue(OpType::UNKNOWN, {}, [this, color, key, made, name] {
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    config.timeoutMs = timeoutMs_;
    config.commName = name->c_str();
    if (!algorithm_.empty()) config.algorithm = algorithm_.c_str();
    check(hocclCommSplit(comm_, color < 0 ? HOCCL_SPLIT_NOCOLOR : color, key, made.get(), &config),
          "hocclCommSplit");
  });
  work->wait();  // rethrows the task's error
  if (!*made) return {};
  return c10::make_intrusive<ProcessGroupHoccl>(*made, timeoutMs_, groupName, algorithm_, "split");
}

c10::intrusive_ptr<ProcessGroupHoccl> ProcessGroupHoccl::createGroup(const std::vector<int>& ranks, double timeoutSec,
                                                                     const std::string& groupName,
                                                                     const std::string& algorithm) {
  int timeoutMs = timeoutMs_;
  if (timeoutSec > 0) {
    const double ms = std::ceil(timeoutSec * 1000);
    timeoutMs = ms >= INT_MAX ? INT_MAX : std::max(1, static_cast<int>(ms));
  }
  auto made = std::make_shared<hocclComm_t>(nullptr);
  auto name = std::make_shared<std::string>(groupName);
  auto algo = std::make_shared<std::string>(algorithm.empty() ? algorithm_ : algorithm);
  auto list = std::make_shared<std::vector<int>>(ranks);
  auto work = enqueue(OpType::UNKNOWN, {}, [this, timeoutMs, made, name, algo, list] {
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    config.timeoutMs = timeoutMs;
    config.commName = name->c_str();
    if (!algo->empty()) config.algorithm = algo->c_str();
    check(hocclCommCreateGroup(comm_, list->data(), static_cast<int>(list->size()), made.get(), &config),
          "hocclCommCreateGroup");
  });
  work->wait();  // rethrows the task's error
  return c10::make_intrusive<ProcessGroupHoccl>(*made, timeoutMs, groupName, *algo, "create_group");
}

c10::intrusive_ptr<ProcessGroupHoccl> ProcessGroupHoccl::shrink(const std::vector<int>& exclude, bool abortFirst,
                                                                const std::string& groupName) {
  hocclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (aborted_ || !comm_)
      throw std::runtime_error("hoccl: shrink: this group's communicator is gone (" +
                               std::string(aborted_ ? "aborted" : "shut down") +
                               (timeoutError_.empty() ? "" : ": " + timeoutError_) +
                               "); shrink a group before aborting it");
    comm = comm_;
  }
  auto made = std::make_shared<hocclComm_t>(nullptr);
  auto name = std::make_shared<std::string>(groupName);
  auto list = std::make_shared<std::vector<int>>(exclude);
  auto call = [this, comm, made, name, list, abortFirst] {
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    config.timeoutMs = timeoutMs_;
    config.commName = name->c_str();
    if (!algorithm_.empty()) config.algorithm = algorithm_.c_str();
    check(hocclCommShrink(comm, list->data(), static_cast<int>(list->size()), made.get(), &config,
                          abortFirst ? HOCCL_SHRINK_ABORT : HOCCL_SHRINK_DEFAULT),
          "hocclCommShrink");
  };
  if (abortFirst) {
    // Not behind the queue: its front may be a call that waits for an
    // excluded rank, which this ends. The communicator stays ours to
    // abort when the group goes.
    failed_ = true;
    call();
  } else {
    enqueue(OpType::UNKNOWN, {}, call)->wait();  // rethrows the task's error
  }
  return c10::make_intrusive<ProcessGroupHoccl>(*made, timeoutMs_, groupName, algorithm_, "shrink");
}

std::vector<int> ProcessGroupHoccl::nodeInfo() const {
  int node = 0, nnodes = 0, localRank = 0, localRanks = 0;
  check(hocclCommNodeInfo(comm_, &node, &nnodes, &localRank, &localRanks), "hocclCommNodeInfo");
  return {node, nnodes, localRank, localRanks};
}

ProcessGroupHoccl::~ProcessGroupHoccl() {
  {
    std::lock_guard<std::mutex> lock(liveMutex());
    liveGroups().erase(this);
  }
  // A future's Python callbacks take the GIL on the worker: never wait for
  // the worker while holding it.
  auto end = [this] {
    stopWorker();
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->group = nullptr;  // Works that outlive the group no longer reach it
    releaseCommLocked();
  };
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    end();
  } else {
    end();
  }
}

void ProcessGroupHoccl::check(hocclResult_t r, const char* call) const {
  if (r == hocclSuccess) return;
  failed_ = true;
  std::string msg = std::string("hoccl: ") + call + " failed: " + hocclGetErrorString(r);
  const char* last = hocclGetLastError(comm_);
  if (last && *last) msg += ": " + std::string(last);
  throw std::runtime_error(msg);
}

std::function<void(hocclResult_t, const char*)> ProcessGroupHoccl::checker() const {
  return [this](hocclResult_t r, const char* call) { check(r, call); };
}

// ---- collectives ------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  checkOne(tensors, "allreduce");
  at::Tensor t = tensors[0];
  Elem e = elemOf(t, "allreduce");
  RedOp op = redOpOf(opts.reduceOp, t, "allreduce");
  return enqueue(OpType::ALLREDUCE, {t}, [this, t, e, op]() mutable {
    at::Tensor d = dense(t);
    CallOp h(op, e.type, comm_, checker());
    check(hocclAllReduce(d.data_ptr(), d.data_ptr(), countOf(d), e.type, h.op, comm_, nullptr), "hocclAllReduce");
    copyBack(t, d);
  }, opts.timeout);
}

// One all-reduce over the tensors laid end to end (all of one dtype).
c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  const std::string m = "allreduce_coalesced";
  if (tensors.empty()) fail(m + ": no tensors");
  for (const auto& t : tensors) {
    checkTensor(t, m);
    checkSameType(t, tensors[0], m);
  }
  Elem e = elemOf(tensors[0], m);
  RedOp op = redOpOf(opts.reduceOp, tensors[0], m);
  std::vector<at::Tensor> ts = tensors;
  return enqueue(OpType::ALLREDUCE_COALESCED, ts, [this, ts, e, op]() mutable {
    at::Tensor flat = concat(ts);
    CallOp h(op, e.type, comm_, checker());
    check(hocclAllReduce(flat.data_ptr(), flat.data_ptr(), countOf(flat), e.type, h.op, comm_, nullptr),
          "hocclAllReduce");
    int64_t off = 0;
    for (auto& t : ts) {
      t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  checkOne(tensors, "broadcast");
  checkRoot(opts.rootRank, size_, "broadcast");
  if (opts.rootTensor != 0) fail("broadcast: rootTensor must be 0 (one tensor per process)");
  at::Tensor t = tensors[0];
  Elem e = elemOf(t, "broadcast");
  int root = static_cast<int>(opts.rootRank);
  return enqueue(OpType::BROADCAST, {t}, [this, t, e, root]() mutable {
    at::Tensor d = dense(t);
    check(hocclBroadcast(d.data_ptr(), d.data_ptr(), countOf(d), e.type, root, comm_, nullptr), "hocclBroadcast");
    copyBack(t, d);
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  checkOne(tensors, "reduce");
  checkRoot(opts.rootRank, size_, "reduce");
  at::Tensor t = tensors[0];
  Elem e = elemOf(t, "reduce");
  RedOp op = redOpOf(opts.reduceOp, t, "reduce");
  int root = static_cast<int>(opts.rootRank);
  return enqueue(OpType::REDUCE, {t}, [this, t, e, op, root]() mutable {
    at::Tensor d = dense(t);
    CallOp h(op, e.type, comm_, checker());
    check(hocclReduce(d.data_ptr(), d.data_ptr(), countOf(d), e.type, h.op, root, comm_, nullptr), "hocclReduce");
    if (rank_ == root) copyBack(t, d);
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  const std::string m = "allgather";
  checkOne(inputs, m);
  if (outputs.size() != 1) fail(m + ": takes one output list per process");
  if (outputs[0].size() != static_cast<size_t>(size_))
    fail(m + ": the output list has " + std::to_string(outputs[0].size()) + " tensors for " +
         std::to_string(size_) + " ranks");
  at::Tensor in = inputs[0];
  for (const auto& o : outputs[0]) {
    checkTensor(o, m);
    checkSameType(o, in, m);
    if (o.numel() != in.numel())
      fail(m + ": an output tensor has " + std::to_string(o.numel()) + " elements, the input " +
           std::to_string(in.numel()));
  }
  Elem e = elemOf(in, m);
  std::vector<at::Tensor> outs = outputs[0];
  return enqueue(OpType::ALLGATHER, outs, [this, in, outs, e]() mutable {
    at::Tensor d = dense(in);
    at::Tensor all = at::empty({size_ * d.numel()}, d.options());
    check(hocclAllGather(d.data_ptr(), all.data_ptr(), countOf(d), e.type, comm_, nullptr), "hocclAllGather");
    for (int r = 0; r < size_; ++r) outs[r].copy_(all.narrow(0, r * d.numel(), d.numel()).view(outs[r].sizes()));
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  const std::string m = "_allgather_base";
  checkTensor(input, m);
  checkTensor(output, m);
  checkSameType(input, output, m);
  if (output.numel() != size_ * input.numel())
    fail(m + ": the output has " + std::to_string(output.numel()) + " elements; expected " +
         std::to_string(size_) + " x " + std::to_string(input.numel()) +
         " (the input's); uneven sizes are not supported (all_gather with a list of tensors takes them)");
  Elem e = elemOf(input, m);
  at::Tensor in = input, out = output;
  return enqueue(OpType::_ALLGATHER_BASE, {out}, [this, in, out, e]() mutable {
    at::Tensor din = dense(in), dout = dense(out);
    check(hocclAllGather(din.data_ptr(), dout.data_ptr(), countOf(din), e.type, comm_, nullptr), "hocclAllGather");
    copyBack(out, dout);
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  fail("allgather_coalesced is not supported (deprecated in torch; use all_gather_into_tensor)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const std::string m = "reduce_scatter";
  checkOne(outputs, m);
  if (inputs.size() != 1) fail(m + ": takes one input list per process");
  if (inputs[0].size() != static_cast<size_t>(size_))
    fail(m + ": the input list has " + std::to_string(inputs[0].size()) + " tensors for " +
         std::to_string(size_) + " ranks");
  at::Tensor out = outputs[0];
  bool even = true;
  for (const auto& i : inputs[0]) {
    checkTensor(i, m);
    checkSameType(i, out, m);
    even = even && i.numel() == out.numel();
  }
  // Block r goes to rank r, so this rank's output takes block `rank`'s size.
  if (inputs[0][rank_].numel() != out.numel())
    fail(m + ": the output has " + std::to_string(out.numel()) + " elements, but this rank's input block (" +
         std::to_string(rank_) + ") has " + std::to_string(inputs[0][rank_].numel()) + " elements");
  Elem e = elemOf(out, m);
  RedOp op = redOpOf(opts.reduceOp, out, m);
  std::vector<at::Tensor> ins = inputs[0];
  if (!even) {
    // Blocks of different sizes, as torch's NCCL backend runs them: one
    // reduce per destination rank, in one group. Every rank must pass the
    // same sizes; a rank that does not gets hoccl's mismatch error.
    return enqueue(OpType::REDUCE_SCATTER, {out}, [this, ins, out, e, op]() mutable {
      std::vector<at::Tensor> dins;
      for (const auto& i : ins) dins.push_back(dense(i));
      at::Tensor d = dense(out);
      CallOp h(op, e.type, comm_, checker());
      check(hocclGroupStart(), "hocclGroupStart");
      hocclResult_t rc = hocclSuccess;
      for (int r = 0; r < size_ && rc == hocclSuccess; ++r)
        rc = hocclReduce(dins[r].data_ptr(), r == rank_ ? d.data_ptr() : nullptr, countOf(dins[r]), e.type, h.op, r,
                         comm_, nullptr);
      hocclResult_t end = hocclGroupEnd();
      check(rc != hocclSuccess ? rc : end, "hocclReduce (reduce_scatter of uneven blocks)");
      copyBack(out, d);
    }, opts.timeout);
  }
  return enqueue(OpType::REDUCE_SCATTER, {out}, [this, ins, out, e, op]() mutable {
    at::Tensor flat = concat(ins);
    at::Tensor d = dense(out);
    CallOp h(op, e.type, comm_, checker());
    check(hocclReduceScatter(flat.data_ptr(), d.data_ptr(), countOf(d), e.type, h.op, comm_, nullptr),
          "hocclReduceScatter");
    copyBack(out, d);
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const std::string m = "_reduce_scatter_base";
  checkTensor(input, m);
  checkTensor(output, m);
  checkSameType(input, output, m);
  if (input.numel() != size_ * output.numel())
    fail(m + ": the input has " + std::to_string(input.numel()) + " elements; expected " +
         std::to_string(size_) + " x " + std::to_string(output.numel()) +
         " (the output's); uneven sizes are not supported (reduce_scatter with a list of tensors takes them)");
  Elem e = elemOf(input, m);
  RedOp op = redOpOf(opts.reduceOp, input, m);
  at::Tensor in = input, out = output;
  return enqueue(OpType::_REDUCE_SCATTER_BASE, {out}, [this, in, out, e, op]() mutable {
    at::Tensor din = dense(in), dout = dense(out);
    CallOp h(op, e.type, comm_, checker());
    check(hocclReduceScatter(din.data_ptr(), dout.data_ptr(), countOf(dout), e.type, h.op, comm_, nullptr),
          "hocclReduceScatter");
    copyBack(out, dout);
  }, opts.timeout);
}

namespace {

// The pairs of a coalesced all-gather or reduce-scatter: as many outputs as
// inputs, each pair of one dtype, the larger `size` times the smaller.
// Returns whether all pairs share one dtype.
bool checkCoalesced(const std::vector<at::Tensor>& small, const std::vector<at::Tensor>& large, int size,
                    const std::string& m, const char* smallName, const char* largeName) {
  if (small.empty() || small.size() != large.size())
    fail(m + ": needs as many outputs as inputs, at least one (got " + std::to_string(large.size()) + " and " +
         std::to_string(small.size()) + ")");
  bool oneType = true;
  for (size_t i = 0; i < small.size(); ++i) {
    checkTensor(small[i], m);
    checkTensor(large[i], m);
    checkSameType(small[i], large[i], m);
    oneType = oneType && small[i].scalar_type() == small[0].scalar_type();
    if (large[i].numel() != size * small[i].numel())
      fail(m + ": " + largeName + " " + std::to_string(i) + " has " + std::to_string(large[i].numel()) +
           " elements; expected " + std::to_string(size) + " x " + std::to_string(small[i].numel()) + " (its " +
           smallName + "'s); uneven sizes are not supported");
  }
  return oneType;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                  std::vector<at::Tensor>& inputs,
                                                                                  const c10d::AllgatherOptions& opts) {
  const std::string m = "allgather_into_tensor_coalesced";
  const bool oneType = checkCoalesced(inputs, outputs, size_, m, "input", "output");
  std::vector<Elem> elems;
  for (const auto& t : inputs) elems.push_back(elemOf(t, m));
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(kCoalescedOp, outs, [this, ins, outs, elems, oneType]() mutable {
    if (!oneType) {  // one call per pair
      for (size_t i = 0; i < ins.size(); ++i) {
        at::Tensor din = dense(ins[i]), dout = dense(outs[i]);
        check(hocclAllGather(din.data_ptr(), dout.data_ptr(), countOf(din), elems[i].type, comm_, nullptr),
              "hocclAllGather");
        copyBack(outs[i], dout);
      }
      return;
    }
    // One all-gather of the inputs laid end to end: rank r's block of the
    // result holds every input of rank r, in order.
    at::Tensor flat = concat(ins);
    const int64_t total = flat.numel();
    at::Tensor all = at::empty({size_ * total}, flat.options());
    check(hocclAllGather(flat.data_ptr(), all.data_ptr(), countOf(flat), elems[0].type, comm_, nullptr),
          "hocclAllGather (coalesced)");
    at::Tensor byRank = all.view({size_, total});
    int64_t off = 0;
    for (auto& o : outs) {
      const int64_t n = o.numel() / size_;
      o.copy_(byRank.narrow(1, off, n).reshape(o.sizes()));
      off += n;
    }
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const std::string m = "reduce_scatter_tensor_coalesced";
  const bool oneType = checkCoalesced(outputs, inputs, size_, m, "output", "input");
  std::vector<Elem> elems;
  std::vector<RedOp> ops;
  for (const auto& t : outputs) {
    elems.push_back(elemOf(t, m));
    ops.push_back(redOpOf(opts.reduceOp, t, m));
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(kCoalescedOp, outs, [this, ins, outs, elems, ops, oneType]() mutable {
    if (!oneType) {
      for (size_t i = 0; i < ins.size(); ++i) {
        at::Tensor din = dense(ins[i]), dout = dense(outs[i]);
        CallOp h(ops[i], elems[i].type, comm_, checker());
        check(hocclReduceScatter(din.data_ptr(), dout.data_ptr(), countOf(dout), elems[i].type, h.op, comm_,
                                 nullptr),
              "hocclReduceScatter");
        copyBack(outs[i], dout);
      }
      return;
    }
    // Block r of the packed input holds block r of every input, in order;
    // one reduce-scatter leaves this rank's blocks of every output end to end.
    std::vector<at::Tensor> byRank;
    for (const auto& t : ins) byRank.push_back(t.reshape({size_, t.numel() / size_}));
    at::Tensor packed = at::cat(byRank, 1).contiguous();
    const int64_t total = packed.numel() / size_;
    at::Tensor mine = at::empty({total}, packed.options());
    CallOp h(ops[0], elems[0].type, comm_, checker());
    check(hocclReduceScatter(packed.data_ptr(), mine.data_ptr(), countOf(mine), elems[0].type, h.op, comm_, nullptr),
          "hocclReduceScatter (coalesced)");
    int64_t off = 0;
    for (auto& o : outs) {
      o.copy_(mine.narrow(0, off, o.numel()).view(o.sizes()));
      off += o.numel();
    }
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::barrier(const c10d::BarrierOptions& opts) {
  // A one-byte all-reduce: it returns on a rank once every rank has entered.
  return enqueue(OpType::BARRIER, {}, [this] {
    uint8_t byte = 0;
    check(hocclAllReduce(&byte, &byte, 1, hocclUint8, hocclMax, comm_, nullptr), "hocclAllReduce (barrier)");
  }, opts.timeout);
}

// ---- point to point: gather, scatter, all-to-all, send, recv ---------------

namespace {

// Gather's outputs or scatter's inputs: the root passes one list of one
// tensor per rank, each like `like`; the other ranks pass none.
std::vector<at::Tensor> rootTensors(const std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& like,
                                    int root, int rank, int size, const std::string& m, const char* what) {
  if (rank != root) {
    if (!lists.empty() && !lists[0].empty())
      fail(m + ": only the root (rank " + std::to_string(root) + ") passes " + what + " tensors");
    return {};
  }
  if (lists.size() != 1 || lists[0].size() != static_cast<size_t>(size))
    fail(m + ": the root needs one " + what + " list of " + std::to_string(size) + " tensors");
  for (const auto& t : lists[0]) {
    checkTensor(t, m);
    checkSameType(t, like, m);
    if (t.numel() != like.numel()) fail(m + ": output and input tensors differ in size");
  }
  return lists[0];
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const std::string m = "gather";
  checkOne(inputs, m);
  checkRoot(opts.rootRank, size_, m);
  int root = static_cast<int>(opts.rootRank);
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = rootTensors(outputs, in, root, rank_, size_, m, "output");
  Elem e = elemOf(in, m);
  // The root receives one message from every rank (itself included, which
  // a hoccl group allows); the others send one to the root.
  return enqueue(OpType::GATHER, outs, [this, in, outs, e, root]() mutable {
    at::Tensor d = dense(in);
    std::vector<at::Tensor> staged;
    for (auto& o : outs) staged.push_back(dense(o));
    check(hocclGroupStart(), "hocclGroupStart");
    hocclResult_t r = hocclSend(d.data_ptr(), countOf(d), e.type, root, comm_, nullptr);
    for (int j = 0; r == hocclSuccess && j < static_cast<int>(staged.size()); ++j)
      r = hocclRecv(staged[j].data_ptr(), countOf(staged[j]), e.type, j, comm_, nullptr);
    hocclResult_t end = hocclGroupEnd();
    check(r != hocclSuccess ? r : end, "hocclSend/hocclRecv (gather)");
    for (size_t j = 0; j < outs.size(); ++j) copyBack(outs[j], staged[j]);
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const std::string m = "scatter";
  checkOne(outputs, m);
  checkRoot(opts.rootRank, size_, m);
  int root = static_cast<int>(opts.rootRank);
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> ins = rootTensors(inputs, out, root, rank_, size_, m, "input");
  Elem e = elemOf(out, m);
  return enqueue(OpType::SCATTER, {out}, [this, ins, out, e, root]() mutable {
    at::Tensor d = dense(out);
    std::vector<at::Tensor> staged;
    for (const auto& i : ins) staged.push_back(dense(i));
    check(hocclGroupStart(), "hocclGroupStart");
    hocclResult_t r = hocclSuccess;
    for (int j = 0; r == hocclSuccess && j < static_cast<int>(staged.size()); ++j)
      r = hocclSend(staged[j].data_ptr(), countOf(staged[j]), e.type, j, comm_, nullptr);
    if (r == hocclSuccess) r = hocclRecv(d.data_ptr(), countOf(d), e.type, root, comm_, nullptr);
    hocclResult_t end = hocclGroupEnd();
    check(r != hocclSuccess ? r : end, "hocclSend/hocclRecv (scatter)");
    copyBack(out, d);
  }, opts.timeout);
}

namespace {

std::vector<int64_t> rowSplits(const std::vector<int64_t>& given, int64_t rows, int size, const std::string& what) {
  if (given.empty()) {
    if (rows % size != 0)
      fail("alltoall_base: " + what + " has " + std::to_string(rows) + " rows, not a multiple of " +
           std::to_string(size) + " ranks (pass split sizes)");
    return std::vector<int64_t>(size, rows / size);
  }
  if (given.size() != static_cast<size_t>(size))
    fail("alltoall_base: " + std::to_string(given.size()) + " " + what + " split sizes for " +
         std::to_string(size) + " ranks");
  int64_t total = 0;
  for (int64_t v : given) {
    if (v < 0) fail("alltoall_base: a negative " + what + " split size");
    total += v;
  }
  if (total != rows)
    fail("alltoall_base: the " + what + " split sizes add up to " + std::to_string(total) + ", the tensor has " +
         std::to_string(rows) + " rows");
  return given;
}

// All-to-all between dense buffers, counts in hoccl elements: hocclAlltoAll
// when every block has the same size, else hocclAlltoAllv.
void alltoallDense(const void* in, const std::vector<size_t>& sendCounts, void* out,
                   const std::vector<size_t>& recvCounts, hocclDataType_t type, hocclComm_t comm,
                   const std::function<void(hocclResult_t, const char*)>& check) {
  bool even = true;
  for (size_t j = 0; j < sendCounts.size(); ++j)
    even = even && sendCounts[j] == sendCounts[0] && recvCounts[j] == sendCounts[0];
  if (even) {
    check(hocclAlltoAll(in, out, sendCounts.empty() ? 0 : sendCounts[0], type, comm, nullptr), "hocclAlltoAll");
    return;
  }
  std::vector<size_t> sdispls(sendCounts.size()), rdispls(recvCounts.size());
  for (size_t j = 1; j < sendCounts.size(); ++j) {
    sdispls[j] = sdispls[j - 1] + sendCounts[j - 1];
    rdispls[j] = rdispls[j - 1] + recvCounts[j - 1];
  }
  check(hocclAlltoAllv(in, sendCounts.data(), sdispls.data(), out, recvCounts.data(), rdispls.data(), type, comm,
                       nullptr),
        "hocclAlltoAllv");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplits,
                                                                std::vector<int64_t>& inputSplits,
                                                                const c10d::AllToAllOptions& opts) {
  const std::string m = "alltoall_base";
  checkTensor(input, m);
  checkTensor(output, m);
  checkSameType(input, output, m);
  if (input.dim() == 0 || output.dim() == 0) fail(m + ": tensors need at least one dimension");
  if (input.sizes().slice(1) != output.sizes().slice(1))
    fail(m + ": input and output differ in their dimensions after the first");
  int64_t inRow = input.numel() / std::max<int64_t>(input.size(0), 1);
  int64_t outRow = output.numel() / std::max<int64_t>(output.size(0), 1);
  int64_t row = input.size(0) ? inRow : outRow;
  Elem e = elemOf(input, m);
  std::vector<size_t> sendCounts, recvCounts;  // hoccl elements
  for (int64_t v : rowSplits(inputSplits, input.size(0), size_, "input"))
    sendCounts.push_back(static_cast<size_t>(v * row * e.perElement));
  for (int64_t v : rowSplits(outputSplits, output.size(0), size_, "output"))
    recvCounts.push_back(static_cast<size_t>(v * row * e.perElement));
  at::Tensor in = input, out = output;
  return enqueue(OpType::ALLTOALL_BASE, {out}, [this, in, out, e, sendCounts, recvCounts]() mutable {
    at::Tensor din = dense(in), dout = dense(out);
    alltoallDense(din.data_ptr(), sendCounts, dout.data_ptr(), recvCounts, e.type, comm_, checker());
    copyBack(out, dout);
  }, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  const std::string m = "alltoall";
  if (outputs.size() != static_cast<size_t>(size_) || inputs.size() != static_cast<size_t>(size_))
    fail(m + ": needs " + std::to_string(size_) + " input and output tensors (got " +
         std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()) + ")");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], m);
    checkTensor(outputs[i], m);
    checkSameType(inputs[i], inputs[0], m);
    checkSameType(outputs[i], inputs[0], m);
  }
  Elem e = elemOf(inputs[0], m);
  std::vector<size_t> sendCounts, recvCounts;
  for (int j = 0; j < size_; ++j) {
    sendCounts.push_back(static_cast<size_t>(inputs[j].numel() * e.perElement));
    recvCounts.push_back(static_cast<size_t>(outputs[j].numel() * e.perElement));
  }
  std::vector<at::Tensor> in = inputs, out = outputs;
  return enqueue(OpType::ALLTOALL, out, [this, in, out, e, sendCounts, recvCounts]() mutable {
    at::Tensor flatIn = concat(in);
    int64_t total = 0;
    for (const auto& o : out) total += o.numel();
    at::Tensor flatOut = at::empty({total}, flatIn.options());
    alltoallDense(flatIn.data_ptr(), sendCounts, flatOut.data_ptr(), recvCounts, e.type, comm_, checker());
    int64_t off = 0;
    for (auto& o : out) {
      o.copy_(flatOut.narrow(0, off, o.numel()).view(o.sizes()));
      off += o.numel();
    }
  }, opts.timeout);
}

// hoccl has no tags: the k-th send from a to b meets b's k-th receive from
// a (as in ProcessGroupNCCL, which ignores tags too). Both are p2p tasks:
// held back until waited on (or until a collective follows), then run in
// one hoccl group with the other held ones (see enqueue).
c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  checkOne(tensors, "send");
  checkRoot(dstRank, size_, "send");
  at::Tensor d = dense(tensors[0]);  // a non-contiguous tensor is copied now
  Elem e = elemOf(d, "send");
  return enqueue(
      OpType::SEND, {},
      [this, d, e, dstRank] { check(hocclSend(d.data_ptr(), countOf(d), e.type, dstRank, comm_, nullptr), "hocclSend"); },
      c10d::kUnsetTimeout, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  checkOne(tensors, "recv");
  checkRoot(srcRank, size_, "recv");
  at::Tensor t = tensors[0];
  if (!t.is_contiguous()) fail("recv: the tensor is not contiguous (receive into a contiguous one and copy)");
  Elem e = elemOf(t, "recv");
  return enqueue(
      OpType::RECV, {t},
      [this, t, e, srcRank] { check(hocclRecv(t.data_ptr(), countOf(t), e.type, srcRank, comm_, nullptr), "hocclRecv"); },
      c10d::kUnsetTimeout, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  fail("recvAnysource is not supported: hoccl has no receive from any source (pass src)");
}

}  // namespace hoccl_torch

// ---- Python module hoccl_torch._C --------------------------------------------

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  using hoccl_torch::ProcessGroupHoccl;
  m.doc() = "hoccl's c10d process group (import hoccl_torch, not this module)";
  py::module::import("torch.distributed");
  // The base class is torch's binding of c10d::ProcessGroup (1.13) or
  // c10d::Backend (2.x).
  py::class_<ProcessGroupHoccl, hoccl_torch::BaseGroup, c10::intrusive_ptr<ProcessGroupHoccl>>(m, "ProcessGroupHoccl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeoutSec,
                       std::string groupName, std::string algorithm) {
             return c10::make_intrusive<ProcessGroupHoccl>(store, rank, size, timeoutSec, std::move(groupName),
                                                          std::move(algorithm));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_sec"), py::arg("group_name") = "",
           py::arg("algorithm") = "", py::call_guard<py::gil_scoped_release>())
      .def("abort", &ProcessGroupHoccl::abort, py::call_guard<py::gil_scoped_release>(),
           "hocclCommAbort: running and queued work fails, the peers are told, later calls raise")
      .def_property_readonly("timeout_sec", &ProcessGroupHoccl::timeoutSec)
      .def_property_readonly("origin", &ProcessGroupHoccl::origin,
                             "how the communicator was made: rendezvous, split or create_group")
      .def("_split", &ProcessGroupHoccl::split, py::arg("color"), py::arg("key"), py::arg("group_name"),
           py::call_guard<py::gil_scoped_release>(),
           "hocclCommSplit in program order: ranks with one color form a new group, ordered by key "
           "(None for a negative color); every rank of this group must call it")
      .def("_create_group", &ProcessGroupHoccl::createGroup, py::arg("ranks"), py::arg("timeout_sec"),
           py::arg("group_name"), py::arg("algorithm") = "", py::call_guard<py::gil_scoped_release>(),
           "hocclCommCreateGroup in program order: a new group of the listed group ranks (in its rank order); "
           "only they call it")
      .def("_shrink", &ProcessGroupHoccl::shrink, py::arg("exclude"), py::arg("abort_first"), py::arg("group_name"),
           py::call_guard<py::gil_scoped_release>(),
           "hocclCommShrink: a new group of this group's ranks minus `exclude` (group ranks); with abort_first "
           "(HOCCL_SHRINK_ABORT) at once, ending this group's work, else in program order")
      .def("shutdown", &ProcessGroupHoccl::shutdown, py::call_guard<py::gil_scoped_release>(),
           "finish queued work, then hocclCommDestroy; later calls raise")
      .def("_allgather_into_tensor_coalesced",
           [](ProcessGroupHoccl& pg, std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs) {
             return pg.allgather_into_tensor_coalesced(outputs, inputs, c10d::AllgatherOptions());
           },
           py::arg("outputs"), py::arg("inputs"), py::call_guard<py::gil_scoped_release>())
      .def("_reduce_scatter_tensor_coalesced",
           [](ProcessGroupHoccl& pg, std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs,
              const c10d::ReduceOp& op) {
             c10d::ReduceScatterOptions opts;
             opts.reduceOp = op;
             return pg.reduce_scatter_tensor_coalesced(outputs, inputs, opts);
           },
           py::arg("outputs"), py::arg("inputs"), py::arg("op") = c10d::ReduceOp(c10d::ReduceOp::SUM),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly_static("torch_api", [](py::object) { return HOCCL_TORCH2 ? 2 : 1; },
                                    "2: built as a c10d::Backend (torch 2.x); 1: as a c10d::ProcessGroup (1.13)")
      .def("_node_info", &ProcessGroupHoccl::nodeInfo,
           "hocclCommNodeInfo: [node, nnodes, local_rank, local_ranks]");
  m.def("_stop_all_workers", &ProcessGroupHoccl::stopAllWorkers, py::call_guard<py::gil_scoped_release>(),
        "finish queued work and end every group's worker thread (run at exit, before the interpreter finalises)");
  int version = 0;
  hocclGetVersion(&version);
  m.attr("hoccl_version") = version;
}
