#include "base/descriptors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>

namespace hoccl {

namespace {

std::mutex& spareMutex() {
  static std::mutex* m = new std::mutex;  // never destroyed: used during exit too
  return *m;
}
int spareFd = -1;  // under spareMutex
// Shared by hoccl's calls that open a descriptor, exclusive while the spare
// is free; the thread using the spare passes through.
std::shared_mutex& openingGate() {
  static std::shared_mutex* m = new std::shared_mutex;
  return *m;
}
thread_local bool usingSpare = false;

int openSpare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

// Taken when the library loads, while descriptors are surely free.
struct SpareAtLoad {
  SpareAtLoad() {
    std::lock_guard<std::mutex> lock(spareMutex());
    if (spareFd < 0) spareFd = openSpare();
  }
} spareAtLoad;

}  // namespace

bool outOfDescriptors(const Status& st) {
  return !st.ok() && st.message().find(strerror(EMFILE)) != std::string::npos;  // ENFILE's text contains it
}

bool withSpareDescriptor(const std::function<void()>& fn) {
  std::lock_guard<std::mutex> lock(spareMutex());
  std::unique_lock<std::shared_mutex> gate(openingGate());
  if (spareFd < 0) spareFd = openSpare();
  if (spareFd < 0) return false;
  ::close(spareFd);
  spareFd = -1;
  usingSpare = true;
  fn();
  usingSpare = false;
  spareFd = openSpare();
  return true;
}

OpeningDescriptor::OpeningDescriptor() : held_(!usingSpare) {
  if (held_) openingGate().lock_shared();
}

OpeningDescriptor::~OpeningDescriptor() {
  if (held_) openingGate().unlock_shared();
}

}  // namespace hoccl
