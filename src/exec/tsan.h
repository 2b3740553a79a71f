// ThreadSanitizer cannot see that two mappings of one shared segment are
// the same memory, so it misses the release/acquire through the slot
// counters when a slot carries a buffer by reference (kSlotDirect). These
// annotations state that edge explicitly, keyed by the address sent; they
// compile to nothing outside TSan builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define HOCCL_TSAN_RELEASE(addr) __tsan_release(reinterpret_cast<void*>(addr))
#define HOCCL_TSAN_ACQUIRE(addr) __tsan_acquire(reinterpret_cast<void*>(addr))
#else
#define HOCCL_TSAN_RELEASE(addr) ((void)(addr))
#define HOCCL_TSAN_ACQUIRE(addr) ((void)(addr))
#endif
