/* One rank, every public entry point that needs no peer. */
#include <hoccl.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  hocclUniqueId id;
  hocclComm_t comm;
  float x[3] = {1, 2, 3}, y[3] = {0};
  if (hocclGetVersion(&version) != hocclSuccess || version != HOCCL_VERSION_CODE) return 1;
  if (hocclGetUniqueId(&id) != hocclSuccess) return 2;
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.timeoutSec = 30;
  if (hocclCommInitRankConfig(&comm, 1, id, 0, &config) != hocclSuccess) return 3;
  if (hocclAllReduce(x, y, 3, hocclFloat, hocclSum, comm, NULL) != hocclSuccess || y[2] != 3) return 4;
  if (hocclCommDestroy(comm) != hocclSuccess) return 5;
  printf("consumer: hoccl %d works through find_package\n", version);
  return 0;
}
