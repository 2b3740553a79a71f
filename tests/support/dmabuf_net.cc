// The dma-buf-mapping test transport (dmabuf_net.h).
#include "tests/support/dmabuf_net.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

namespace hoccl::testsupport {
namespace {

std::atomic<int> registrations{0}, flushes{0}, transfers{0};

struct Reg {
  void* inner = nullptr;   // the wrapped transport's registration of `view`
  uintptr_t dev = 0;       // the address callers use (the device address)
  size_t size = 0;
  void* map = nullptr;     // the mapping, from a page boundary
  size_t mapLen = 0;
  char* view = nullptr;    // where `dev` is in it
};

class DmabufNet final : public NetTransport {
 public:
  explicit DmabufNet(std::unique_ptr<NetTransport> inner) : in_(std::move(inner)) {}
  const char* name() const override { return in_->name(); }
  int devices() const override { return in_->devices(); }
  Status getProperties(int dev, NetProperties* p) const override {
    HOCCL_TRY(in_->getProperties(dev, p));
    p->ptrSupport |= kPtrCuda | kPtrDmabuf;
    p->gdrWhy.clear();
    return Status();
  }
  Status listen(int dev, void* handle, void** lc) override { return in_->listen(dev, handle, lc); }
  Status connect(int dev, void* handle, void** sc) override { return in_->connect(dev, handle, sc); }
  Status accept(void* lc, void** rc) override { return in_->accept(lc, rc); }
  Status regMr(void* comm, void* data, size_t size, int type, void** mh) override {
    return in_->regMr(comm, data, size, type, mh);
  }
  Status regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mh) override {
    *mh = nullptr;
    if (!(type & kPtrDmabuf) || fd < 0 || size == 0)
      return errorf(hocclInvalidArgument, "dma-buf test transport: type %#x, fd %d, %zu bytes", type, fd, size);
    const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    auto r = std::make_unique<Reg>();
    r->mapLen = size + offset % page;
    r->map = mmap(nullptr, r->mapLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset - offset % page));
    if (r->map == MAP_FAILED)
      return errorf(hocclSystemError, "dma-buf test transport: mmap of fd %d: %s (the exporter refuses CPU mappings)",
                    fd, strerror(errno));
    r->view = static_cast<char*>(r->map) + offset % page;
    r->dev = reinterpret_cast<uintptr_t>(data);
    r->size = size;
    Status st = in_->regMr(comm, r->view, size, kPtrHost, &r->inner);
    if (!st.ok()) {
      munmap(r->map, r->mapLen);
      return st;
    }
    ++registrations;
    std::lock_guard<std::mutex> l(mu_);
    *mh = r.get();
    regs_.insert(r.release());
    return Status();
  }
  Status deregMr(void* comm, void* mh) override {
    Reg* r = ours(mh);
    if (!r) return in_->deregMr(comm, mh);
    Status st = in_->deregMr(comm, r->inner);
    munmap(r->map, r->mapLen);
    {
      std::lock_guard<std::mutex> l(mu_);
      regs_.erase(r);
    }
    delete r;
    return st;
  }
  Status isend(void* sc, void* data, size_t size, int tag, void* mh, void** req) override {
    Reg* r = ours(mh);
    if (!r) return in_->isend(sc, data, size, tag, mh, req);
    void* at = nullptr;
    HOCCL_TRY(translate(*r, data, size, &at));
    ++transfers;
    return in_->isend(sc, at, size, tag, r->inner, req);
  }
  Status irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) override {
    void* at[kNetMaxRequests];
    void* inner[kNetMaxRequests];
    if (n < 1 || n > kNetMaxRequests) return in_->irecv(rc, n, data, sizes, tags, mhs, req);
    bool any = false;
    for (int i = 0; i < n; ++i) {
      Reg* r = mhs ? ours(mhs[i]) : nullptr;
      at[i] = data[i];
      inner[i] = mhs ? mhs[i] : nullptr;
      if (!r) continue;
      HOCCL_TRY(translate(*r, data[i], sizes[i], &at[i]));
      inner[i] = r->inner;
      any = true;
    }
    if (any) ++transfers;
    return in_->irecv(rc, n, at, sizes, tags, mhs ? inner : nullptr, req);
  }
  // The mapping is the memory itself: nothing to push out, but each flush
  // of a dma-buf receive is counted, so a test sees the proxy asked.
  Status iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req) override {
    *req = nullptr;
    for (int i = 0; mhs && i < n; ++i)
      if (ours(mhs[i]) && sizes[i] > 0) ++flushes;
    (void)rc, (void)data;
    return Status();
  }
  Status test(void* req, int* done, int* sizes) override { return in_->test(req, done, sizes); }
  Status closeSend(void* c) override { return in_->closeSend(c); }
  Status closeRecv(void* c) override { return in_->closeRecv(c); }
  Status closeListen(void* c) override { return in_->closeListen(c); }
  Status health(void* c) override { return in_->health(c); }
  void consumerWaiting(bool s) override { in_->consumerWaiting(s); }
  Status pairControl(void* s, void* r, bool owns) override { return in_->pairControl(s, r, owns); }

 private:
  Reg* ours(void* mh) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = regs_.find(static_cast<Reg*>(mh));
    return it == regs_.end() ? nullptr : *it;
  }
  static Status translate(const Reg& r, void* data, size_t size, void** at) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(data);
    if (a < r.dev || a + size > r.dev + r.size)
      return errorf(hocclInvalidArgument, "dma-buf test transport: %zu bytes at %p outside the registration", size,
                    data);
    *at = r.view + (a - r.dev);
    return Status();
  }

  std::unique_ptr<NetTransport> in_;
  std::mutex mu_;
  std::set<Reg*> regs_;
};

}  // namespace

std::unique_ptr<NetTransport> wrapWithDmabuf(std::unique_ptr<NetTransport> inner) {
  return std::make_unique<DmabufNet>(std::move(inner));
}

DmabufNetCounts dmabufNetCounts() { return {registrations.load(), flushes.load(), transfers.load()}; }

}  // namespace hoccl::testsupport
