// One collective call on one rank, checked against the closed-form values
// of src/check/values.h: the check every correctness test shares.
#pragma once

#include <cstdint>
#include <string>

#include "hoccl.h"

namespace testutil {

enum class Coll { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce };
// Mixed: even ranks in place, odd ranks out of place (ranks may differ).
enum class Placement { OutOfPlace, InPlace, Mixed };

struct Call {
  Coll coll = Coll::AllReduce;
  hocclDataType_t type = hocclFloat32;
  hocclRedOp_t op = hocclSum;  // ignored by all-gather and broadcast
  uint64_t count = 0;          // NCCL's count: per rank for reduce-scatter and all-gather
  Placement placement = Placement::OutOfPlace;
};

const char* collName(Coll c);
const char* placementName(Placement p);
bool reduces(Coll c);  // takes an op
bool inPlaceOn(Placement p, int rank);
// Broadcast's and reduce's root moves with the count.
int rootOf(const Call& c, int nranks);
// "AllReduce float32 sum count 1009 in-place".
std::string describe(const Call& c);

// Runs c on this rank of an nranks communicator and checks what it
// received (every element; the root only, for reduce) with GoogleTest
// assertions that name the call and the rank.
void runAndCheck(hocclComm_t comm, int rank, int nranks, const Call& c);

}  // namespace testutil
