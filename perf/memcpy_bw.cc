// memcpy_bw: single-core memcpy bandwidth per size, the physical reference
// the comparison prints beside each library's bus bandwidth.
//   memcpy_bw <minBytes> <maxBytes> <factor> [-J file]
// Prints "size GB/s" rows; with -J also JSON lines {"size":..,"gbps":..}.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s minBytes maxBytes factor [-J file]\n", argv[0]);
    return 2;
  }
  size_t lo = strtoull(argv[1], nullptr, 0), hi = strtoull(argv[2], nullptr, 0);
  double factor = atof(argv[3]);
  FILE* json = nullptr;
  if (argc >= 6 && !strcmp(argv[4], "-J")) json = fopen(argv[5], "w");
  if (lo == 0 || hi < lo || factor <= 1) {
    fprintf(stderr, "%s: need 0 < minBytes <= maxBytes and factor > 1\n", argv[0]);
    return 2;
  }
  std::vector<char> src(hi, 1), dst(hi, 2);
  printf("# single-core memcpy bandwidth\n# %12s  %8s\n", "size(B)", "GB/s");
  for (size_t size = lo; size <= hi; size = static_cast<size_t>(size * factor)) {
    // Enough repetitions for ~50 ms, at least 5.
    int reps = 5;
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        memcpy(dst.data(), src.data(), size);
        asm volatile("" : : "r"(dst.data()) : "memory");
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
      best = std::min(best, secs);
      if (secs * reps < 0.05) reps = std::min(1 << 20, reps * 4);
    }
    double gbps = size / best / 1e9;
    printf("  %12zu  %8.2f\n", size, gbps);
    if (json) fprintf(json, "{\"size\":%zu,\"gbps\":%.4f}\n", size, gbps);
  }
  if (json) fclose(json);
  return 0;
}
