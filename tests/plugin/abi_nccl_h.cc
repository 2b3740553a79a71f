// hoccl's plugin declarations compiled after the installed NCCL's nccl.h:
// common.h then takes ncclResult_t, ncclDataType_t and ncclRedOp_t from
// NCCL, and hoccl_nccl/abi_check.h checks NCCL's own values (and every
// struct built on them) against the numbers it holds. The work is done by
// the compiler; the program only reports which nccl.h it was.
#include <nccl.h>

#include <cstdio>

#include "hoccl_nccl/net.h"
#include "hoccl_nccl/tuner.h"

static_assert(sizeof(ncclResult_t) == 4, "");

int main() {
  printf("hoccl's plugin ABI checks hold against nccl.h %d.%d.%d (NCCL_VERSION_CODE %d)\n", NCCL_MAJOR, NCCL_MINOR,
         NCCL_PATCH, NCCL_VERSION_CODE);
  return 0;
}
