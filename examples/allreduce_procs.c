/* A first all-reduce: forks N processes (default 4), passes the unique id
 * through a pipe, all-reduces a float buffer (default 64 MiB), checks the
 * result and prints time and bus bandwidth. Uses only <hoccl.h>.
 *
 *   hoccl_example_allreduce [nranks] [MiB] [iterations]
 */
#include <hoccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    hocclResult_t rc_ = (call);                                                            \
    if (rc_ != hocclSuccess) {                                                             \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, hocclGetErrorString(rc_), \
              hocclGetLastError(NULL));                                                    \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int runRank(int rank, int nranks, hocclUniqueId id, size_t count, int iters) {
  hocclComm_t comm;
  CHECK(hocclCommInitRank(&comm, nranks, id, rank));
  float* buf = malloc(count * sizeof(float));
  if (!buf) return 1;
  for (size_t i = 0; i < count; ++i) buf[i] = (float)((rank + i) % 3);
  /* Correctness first: one in-place sum, checked element by element. */
  CHECK(hocclAllReduce(buf, buf, count, hocclFloat, hocclSum, comm, NULL));
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += (float)((r + i) % 3);
    wrong += buf[i] != want;
  }
  /* Then time out-of-place iterations. */
  float* out = malloc(count * sizeof(float));
  if (!out) return 1;
  CHECK(hocclAllReduce(buf, out, count, hocclFloat, hocclSum, comm, NULL)); /* warm-up */
  double t0 = now();
  for (int i = 0; i < iters; ++i) CHECK(hocclAllReduce(buf, out, count, hocclFloat, hocclSum, comm, NULL));
  double sec = (now() - t0) / iters;
  if (rank == 0) {
    double bytes = (double)count * sizeof(float);
    double algbw = bytes / sec / 1e9;
    printf("hoccl all-reduce: %d ranks (processes), %.0f MiB float sum, %d iterations\n", nranks,
           bytes / (1 << 20), iters);
    printf("  time %.2f ms   algbw %.2f GB/s   busbw %.2f GB/s   wrong elements %zu\n", sec * 1e3, algbw,
           algbw * 2.0 * (nranks - 1) / nranks, wrong);
  }
  CHECK(hocclCommDestroy(comm));
  free(buf);
  free(out);
  return wrong != 0;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 4;
  size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 64;
  int iters = argc > 3 ? atoi(argv[3]) : 5;
  int rank = 0;
  if (nranks < 1 || iters < 1) {
    fprintf(stderr, "usage: %s [nranks>=1] [MiB] [iterations>=1]\n", argv[0]);
    return 2;
  }
  size_t count = mib * (1 << 20) / sizeof(float);
  hocclUniqueId id;
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid_t* pids = calloc(nranks, sizeof(pid_t));
  for (int r = 1; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      rank = r;
      close(fds[1]);
      /* Each child reads the id that rank 0 writes once per child. */
      if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id) return 1;
      return runRank(r, nranks, id, count, iters);
    }
  }
  close(fds[0]);
  CHECK(hocclGetUniqueId(&id));
  for (int r = 1; r < nranks; ++r)
    if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) return 1;
  int status = runRank(0, nranks, id, count, iters);
  for (int r = 1; r < nranks; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) status = 1;
  }
  free(pids);
  return status;
}
