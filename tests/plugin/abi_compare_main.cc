// Compares hoccl's plugin struct layouts with NCCL's own headers, member by
// member (abi_compare.h). Fails on any difference, and when NCCL's headers
// held none of the versions hoccl exports.
#include <cstdio>
#include <cstring>

#include "tests/plugin/abi_compare.h"

using abicompare::Member;

int main() {
  int compared = 0, differ = 0;
  for (const Member* n = abicompare::kNccl; n->type; ++n) {
    const Member* h = abicompare::kHoccl;
    while (h->type && !(strcmp(h->type, n->type) == 0 && strcmp(h->member, n->member) == 0)) ++h;
    if (!h->type) {
      printf("FAIL: %s.%s is not in hoccl's table\n", n->type, n->member);
      ++differ;
      continue;
    }
    ++compared;
    if (h->offset != n->offset || h->size != n->size || h->kind != n->kind) {
      printf("FAIL: %s%s%s: NCCL offset %zu size %zu kind %#x, hoccl offset %zu size %zu kind %#x\n", n->type,
             *n->member ? "." : "", n->member, n->offset, n->size, n->kind, h->offset, h->size, h->kind);
      ++differ;
    }
  }
  printf("compared %d sizes and members with NCCL's headers (versions: %s): %d differ\n", compared,
         abicompare::kNcclVersions, differ);
  if (compared == 0) {
    printf("FAIL: NCCL's headers held no version hoccl exports\n");
    return 1;
  }
  return differ ? 1 : 0;
}
