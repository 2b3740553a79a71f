// Closed-form data for checking collectives, shared by the benchmarks
// (perf/) and the tests (tests/): each rank's inputs and the exact expected
// results for every type and op. It depends on include/hoccl.h only (public
// enums), so perf and tests both link it (target hoccl_check) and neither
// depends on the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hoccl.h"

namespace checkvals {

size_t typeSize(hocclDataType_t t);
const char* typeName(hocclDataType_t t);
const char* opName(hocclRedOp_t op);

// Rank r's value at global element index i, chosen so that the result of
// every op is exact in every type (small integers, powers of two).
double inputValue(hocclDataType_t t, hocclRedOp_t op, int rank, uint64_t i);
// The reduction of element i over nranks, with the type's own semantics
// (integer wrap-around, NCCL's integer avg).
double expectedReduce(hocclDataType_t t, hocclRedOp_t op, int nranks, uint64_t i);
// Data for gathers and broadcast: rank r's element i.
double gatherValue(hocclDataType_t t, int rank, uint64_t i);

void store(void* buf, hocclDataType_t t, uint64_t idx, double v);
double load(const void* buf, hocclDataType_t t, uint64_t idx);
// True if `got` is the expected value (exact, except float avg which
// allows the rounding of one division).
bool matches(hocclDataType_t t, hocclRedOp_t op, double got, double want);

// Fills n elements of rank's reduction input starting at global index first.
void fillReduceInput(void* buf, hocclDataType_t t, hocclRedOp_t op, int rank, uint64_t first, uint64_t n);
// Number of wrong elements in a reduction result covering [first, first+n).
uint64_t countReduceErrors(const void* buf, hocclDataType_t t, hocclRedOp_t op, int nranks, uint64_t first,
                           uint64_t n, std::string* firstError = nullptr);

}  // namespace checkvals
