// The Gloo backend: NCCL's argument meaning on top of Gloo's collectives.
//
// Gloo has two APIs. The old one (AllreduceRingChunked, ...) is a class
// template built once over fixed buffers, then run many times; it reduces in
// place. The new one (gloo::allreduce(opts), ...) takes buffers per call and
// handles out-of-place itself. Both are used; --extra picks the algorithm.
#include "perf/peers/gloo_backend.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <type_traits>
#include <vector>

namespace glooperf {
namespace {

using bench::Coll;

// fp16. Gloo declares gloo::float16, but libgloo does not export the
// conversions its arithmetic calls, so half data travels as this storage type
// and reduces through the functions below (fp32 math, round to nearest even),
// handed to Gloo as its reduction functions.
struct Half {
  uint16_t bits;
};

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float f;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    f = std::ldexp(static_cast<float>(man), -24);
    return sign ? -f : f;
  }
  uint32_t bits = sign | (exp == 0x1f ? 0x7f800000u | (man << 13) : ((exp + 112) << 23) | (man << 13));
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00;          // NaN
  if (x >= 0x47800000u) return sign | 0x7c00;         // >= 65536 (and inf): inf
  if (x < 0x38800000u) {                              // below 2^-14: subnormal
    float a;
    memcpy(&a, &x, sizeof a);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::lrint(a * 16777216.0f)));
  }
  uint32_t h = (((x >> 23) - 112) << 10) | ((x & 0x7fffffu) >> 13);
  uint32_t rest = x & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry rolls into the exponent, up to inf
  return static_cast<uint16_t>(sign | h);
}

enum OpKind { kSum, kProd, kMax, kMin };

int opKind(hocclRedOp_t op) {
  switch (op) {
    case hocclProd: return kProd;
    case hocclMax: return kMax;
    case hocclMin: return kMin;
    default: return kSum;
  }
}

template <int K>
void halfReduce(void* c, const void* a, const void* b, size_t n) {
  Half* pc = static_cast<Half*>(c);
  const Half* pa = static_cast<const Half*>(a);
  const Half* pb = static_cast<const Half*>(b);
  for (size_t i = 0; i < n; ++i) {
    float x = halfToFloat(pa[i].bits), y = halfToFloat(pb[i].bits);
    float r = K == kSum ? x + y : K == kProd ? x * y : K == kMax ? std::max(x, y) : std::min(x, y);
    pc[i].bits = floatToHalf(r);
  }
}

template <int K>
void halfReduceInPlace(Half* a, const Half* b, size_t n) {
  halfReduce<K>(a, a, b, n);
}

// The new API's reduction function: (out, in1, in2, n) on untyped memory.
using NewFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
NewFn newStyleFn(hocclRedOp_t op) {
  if constexpr (std::is_same_v<T, Half>) {
    static const NewFn fns[] = {&halfReduce<kSum>, &halfReduce<kProd>, &halfReduce<kMax>, &halfReduce<kMin>};
    return fns[opKind(op)];
  } else {
    static const NewFn fns[] = {static_cast<NewFn>(&gloo::sum<T>), static_cast<NewFn>(&gloo::product<T>),
                                static_cast<NewFn>(&gloo::max<T>), static_cast<NewFn>(&gloo::min<T>)};
    return fns[opKind(op)];
  }
}

// The old API's reduction function object.
template <typename T>
const gloo::ReductionFunction<T>* oldStyleFn(hocclRedOp_t op) {
  if constexpr (std::is_same_v<T, Half>) {
    static const gloo::ReductionFunction<Half> fns[] = {{gloo::SUM, &halfReduceInPlace<kSum>},
                                                         {gloo::PRODUCT, &halfReduceInPlace<kProd>},
                                                         {gloo::MAX, &halfReduceInPlace<kMax>},
                                                         {gloo::MIN, &halfReduceInPlace<kMin>}};
    return &fns[opKind(op)];
  } else {
    switch (opKind(op)) {
      case kProd: return gloo::ReductionFunction<T>::product;
      case kMax: return gloo::ReductionFunction<T>::max;
      case kMin: return gloo::ReductionFunction<T>::min;
      default: return gloo::ReductionFunction<T>::sum;
    }
  }
}

// Calls f with a null T* for the element type of t.
template <typename F>
std::string withType(hocclDataType_t t, F&& f) {
  switch (t) {
    case hocclInt8: return f(static_cast<int8_t*>(nullptr));
    case hocclUint8: return f(static_cast<uint8_t*>(nullptr));
    case hocclInt32: return f(static_cast<int32_t*>(nullptr));
    case hocclUint32: return f(static_cast<uint32_t*>(nullptr));
    case hocclInt64: return f(static_cast<int64_t*>(nullptr));
    case hocclUint64: return f(static_cast<uint64_t*>(nullptr));
    case hocclFloat16: return f(static_cast<Half*>(nullptr));
    case hocclFloat32: return f(static_cast<float*>(nullptr));
    case hocclFloat64: return f(static_cast<double*>(nullptr));
    default: return "type not supported by Gloo";
  }
}

// The old API counts elements and bytes in int.
bool fitsInt(size_t elements, size_t elementSize) {
  return elements <= static_cast<size_t>(INT_MAX) / elementSize;
}

const std::vector<std::string>& algorithmsFor(Coll c) {
  // The first is the default.
  static const std::vector<std::string> allReduce = {"ring_chunked", "halving_doubling", "ring", "new_ring",
                                                     "new_bcube"};
  static const std::vector<std::string> reduceScatter = {"halving_doubling"};
  static const std::vector<std::string> allGather = {"ring"};
  static const std::vector<std::string> broadcast = {"binomial", "one_to_all"};
  static const std::vector<std::string> reduce = {"ring"};
  switch (c) {
    case Coll::AllReduce: return allReduce;
    case Coll::ReduceScatter: return reduceScatter;
    case Coll::AllGather: return allGather;
    case Coll::Broadcast: return broadcast;
    default: return reduce;
  }
}

class GlooBackend : public bench::Backend {
 public:
  GlooBackend(std::shared_ptr<gloo::Context> ctx, std::string algo) : ctx_(std::move(ctx)), algo_(std::move(algo)) {}

  const char* library() const override { return "gloo"; }
  std::string algorithm() const override { return algo_; }
  int rank() const override { return ctx_->rank; }
  int nranks() const override { return ctx_->size; }
  // Every type but bfloat16 and fp8 (Gloo has none); sum, prod, max, min (no avg).
  bool supports(Coll c, hocclDataType_t t, hocclRedOp_t op) const override {
    if (c == Coll::AllToAll || c == Coll::SendRecv) return false;  // not driven here
    return t != hocclBfloat16 && t != hocclFloat8e4m3 && t != hocclFloat8e5m2 && (op == hocclSum || op == hocclProd || op == hocclMax || op == hocclMin);
  }

  std::string run(Coll c, const void* send, void* recv, size_t count, hocclDataType_t t, hocclRedOp_t op,
                  int root) override {
    if (count == 0) return "";  // a no-op in NCCL; Gloo's algorithms reject empty buffers
    try {
      return withType(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        return runTyped<T>(c, static_cast<T*>(const_cast<void*>(send)), static_cast<T*>(recv), count, t, op, root);
      });
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  double allReduceDouble(double v, hocclRedOp_t op) override {
    double out = v;
    gloo::AllreduceOptions o(ctx_);
    o.setOutput(&out, 1);
    o.setReduceFunction(newStyleFn<double>(op));
    gloo::allreduce(o);
    return out;
  }

  void barrier() override {
    gloo::BarrierOptions o(ctx_);
    gloo::barrier(o);
  }

  std::string deviceDescription() const override { return bench::deviceLine(ctx_->rank, "host memory (gloo tcp)"); }

  std::vector<std::string> allGatherLine(const std::string& mine) override {
    const size_t n = static_cast<size_t>(ctx_->size);
    std::vector<char> line(bench::kLineBytes, 0), all(bench::kLineBytes * n, 0);
    snprintf(line.data(), line.size(), "%s", mine.c_str());
    if (n == 1) {
      all = line;
    } else {
      gloo::AllgatherOptions o(ctx_);
      o.setInput(line.data(), line.size());
      o.setOutput(all.data(), all.size());
      gloo::allgather(o);
    }
    std::vector<std::string> lines;
    for (size_t r = 0; r < n; ++r) lines.emplace_back(all.data() + r * bench::kLineBytes);
    return lines;
  }

 private:
  // Identifies an old-style algorithm object: the call's arguments and the
  // buffer the object is bound to.
  struct Key {
    Coll coll;
    hocclDataType_t type;
    hocclRedOp_t op;
    size_t count;
    int root;
    const void* bound;
    bool operator==(const Key&) const = default;
  };

  // Old-style algorithm objects register their buffers with the transport
  // and allocate scratch when built; Gloo means them to be built once and run
  // many times, so the backend keeps the last one and rebuilds it when the
  // call changes. Every rank rebuilds at the same call: the driver makes the
  // same calls on every rank and moves a rank's buffers only when the
  // arguments change as well. The barrier lets every peer finish with the
  // old object before its buffers are unregistered.
  template <typename Make>
  gloo::Algorithm& oldStyle(const Key& key, Make&& make) {
    if (!cached_ || !(key == key_)) {
      if (cached_) barrier();
      cached_.reset();
      cached_ = make();
      key_ = key;
    }
    return *cached_;
  }

  template <typename T>
  std::string runTyped(Coll c, T* in, T* out, size_t count, hocclDataType_t t, hocclRedOp_t op, int root) {
    const size_t bytes = count * sizeof(T);
    const int n = ctx_->size, me = ctx_->rank;
    switch (c) {
      case Coll::AllReduce: {
        if (algo_ == "new_ring" || algo_ == "new_bcube") {
          gloo::AllreduceOptions o(ctx_);
          o.setAlgorithm(algo_ == "new_bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                              : gloo::AllreduceOptions::Algorithm::RING);
          if (in != out) o.setInput(in, count);
          o.setOutput(out, count);
          o.setReduceFunction(newStyleFn<T>(op));
          gloo::allreduce(o);
          return "";
        }
        if (!fitsInt(count, sizeof(T))) return "count too large for Gloo's old-style algorithms (int bytes)";
        // The old-style algorithms reduce in place, so out-of-place first
        // copies send to recv. The copy is timed: a Gloo user pays it too.
        if (in != out) memcpy(out, in, bytes);
        oldStyle(Key{c, t, op, count, 0, out}, [&]() -> std::unique_ptr<gloo::Algorithm> {
          std::vector<T*> ptrs{out};
          const int elems = static_cast<int>(count);
          if (algo_ == "halving_doubling")
            return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx_, ptrs, elems, oldStyleFn<T>(op));
          if (algo_ == "ring") return std::make_unique<gloo::AllreduceRing<T>>(ctx_, ptrs, elems, oldStyleFn<T>(op));
          return std::make_unique<gloo::AllreduceRingChunked<T>>(ctx_, ptrs, elems, oldStyleFn<T>(op));
        }).run();
        return "";
      }
      case Coll::ReduceScatter: {
        // ReduceScatterHalvingDoubling reduces all n*count elements in place
        // in one buffer and leaves this rank's block (recvElems[rank] =
        // count) at the start of that buffer. Out of place, the const input
        // is first copied to work space; in place, the input buffer is the
        // work space (NCCL does not promise the rest of it survives). The
        // copies in and out are timed: a Gloo user pays them too.
        const size_t total = count * static_cast<size_t>(n);
        if (!fitsInt(total, sizeof(T))) return "count too large for Gloo's reduce-scatter (int bytes)";
        T* work = in;
        if (out != in + static_cast<size_t>(me) * count) {
          if (scratch_.size() < total * sizeof(T)) scratch_.resize(total * sizeof(T));
          work = reinterpret_cast<T*>(scratch_.data());
          memcpy(work, in, total * sizeof(T));
        }
        oldStyle(Key{c, t, op, count, 0, work}, [&]() -> std::unique_ptr<gloo::Algorithm> {
          return std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
              ctx_, std::vector<T*>{work}, static_cast<int>(total), std::vector<int>(n, static_cast<int>(count)),
              oldStyleFn<T>(op));
        }).run();
        if (work != out) memmove(out, work, bytes);
        return "";
      }
      case Coll::AllGather: {
        T* mine = out + static_cast<size_t>(me) * count;
        if (n == 1) {  // Gloo's ring needs a neighbour
          if (in != mine) memcpy(mine, in, bytes);
          return "";
        }
        gloo::AllgatherOptions o(ctx_);
        if (in != mine) o.setInput(in, count);  // in place: this rank's block is already in out
        o.setOutput(out, count * static_cast<size_t>(n));
        gloo::allgather(o);
        return "";
      }
      case Coll::Broadcast: {
        if (algo_ == "one_to_all") {
          if (!fitsInt(count, sizeof(T))) return "count too large for Gloo's old-style algorithms (int bytes)";
          // In place over out: the root copies send to recv first (timed).
          if (me == root && in != out) memcpy(out, in, bytes);
          oldStyle(Key{c, t, hocclSum, count, root, out}, [&]() -> std::unique_ptr<gloo::Algorithm> {
            return std::make_unique<gloo::BroadcastOneToAll<T>>(ctx_, std::vector<T*>{out}, count, root, 0);
          }).run();
          return "";
        }
        gloo::BroadcastOptions o(ctx_);
        if (me == root && in != out) o.setInput(in, count);  // Gloo copies it to out itself
        o.setOutput(out, count);
        o.setRoot(root);
        gloo::broadcast(o);
        return "";
      }
      case Coll::Reduce: {
        gloo::ReduceOptions o(ctx_);
        if (in != out) o.setInput(in, count);
        o.setOutput(out, count);  // also work space on non-root ranks
        o.setRoot(root);
        o.setReduceFunction(newStyleFn<T>(op));
        gloo::reduce(o);
        return "";
      }
      default: break;
    }
    return "unknown collective";
  }

  std::shared_ptr<gloo::Context> ctx_;
  std::string algo_;
  std::unique_ptr<gloo::Algorithm> cached_;
  Key key_{};
  std::vector<char> scratch_;
};

}  // namespace

bool resolveAlgorithm(Coll coll, const std::string& requested, std::string* algo, std::string* choices) {
  const std::vector<std::string>& names = algorithmsFor(coll);
  choices->clear();
  for (const std::string& name : names) *choices += (choices->empty() ? "" : ", ") + name;
  if (requested.empty()) {
    *algo = names.front();
    return true;
  }
  if (std::find(names.begin(), names.end(), requested) == names.end()) return false;
  *algo = requested;
  return true;
}

std::unique_ptr<bench::Backend> makeGlooBackend(std::shared_ptr<gloo::Context> context, Coll,
                                                const std::string& algo) {
  return std::make_unique<GlooBackend>(std::move(context), algo);
}

}  // namespace glooperf
