// GPU memory for the benchmarks (--buffers device): the CUDA driver opened with
// dlopen("libcuda.so.1"), as libhoccl opens it, so the perf programs link
// no CUDA library and run unchanged where there is none (--buffers device then
// fails with the driver's reason). Each rank (thread) makes its own: it
// uses device `ordinal` (modulo the device count) through its primary
// context, so ranks of one process share a GPU's context.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace bench {

// Ranks as threads put one stream each on the GPU (and hoccl one more for
// its uploads), and every rank's launch waits for the others': more
// hardware queues than the driver's default 8, so that no launch queues
// behind a waiting one. The driver reads CUDA_DEVICE_MAX_CONNECTIONS once,
// when it starts: call this before any CUDA call, hoccl's included (its
// init discovers devices). A value the user set is kept. On an H100, 8
// ranks with the default 8 queues timed out in about one sweep in three.
void askForDeviceQueues();

class DeviceMemory {
 public:
  // Null with *error saying why (no driver, no device, ...).
  static std::unique_ptr<DeviceMemory> open(int ordinal, std::string* error);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Each returns "" or what failed (the driver's error name).
  std::string alloc(size_t bytes, void** p);
  std::string toDevice(void* dst, const void* src, size_t bytes);
  std::string toHost(void* dst, const void* src, size_t bytes);
  // This rank's stream (non-blocking: ranks sharing a GPU must not wait
  // on each other's launches through the legacy default stream). The
  // collectives are queued on it; the copies above run on it.
  void* stream() const { return stream_; }
  // The device's own copy rate, the ceiling for what a collective on it
  // can move: `iters` cuMemcpyDtoD of `bytes` between two new buffers,
  // timed together after one untimed copy; *gbs = bytes copied per second / 1e9.
  std::string copyRate(size_t bytes, int iters, double* gbs);
  // Waits until everything queued on the stream so far has ended.
  std::string sync();
  // Whether it has (*done), without waiting.
  std::string query(bool* done);
  // "NVIDIA H100 80GB HBM3 [0000:1b:00]": for the "# Using devices" line.
  const std::string& name() const { return name_; }
  int ordinal() const { return ordinal_; }
  struct Api;  // the driver's entry points (device_mem.cc)

 private:
  DeviceMemory() = default;
  std::string check(int rc, const char* what) const;
  const Api* api_ = nullptr;
  void* ctx_ = nullptr;
  void* stream_ = nullptr;
  int device_ = 0, ordinal_ = 0;
  std::string name_;
  std::vector<unsigned long long> allocations_;
};

}  // namespace bench
