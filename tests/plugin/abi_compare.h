// The comparison of hoccl's plugin struct declarations with NCCL's own
// headers: two translation units each describe every member listed in
// abi_fields.def (one through hoccl's declarations, one through NCCL's, as
// they cannot share a unit), and abi_compare_main.cc compares the tables.
#pragma once

#include <cstddef>
#include <type_traits>

namespace abicompare {

struct Member {
  const char* type;    // NCCL's type name
  const char* member;  // "" for the struct's size
  size_t offset, size;
  unsigned kind;
};

template <typename T>
constexpr unsigned kindOf() {
  return (std::is_pointer<T>::value ? 1u : 0u) | (std::is_floating_point<T>::value ? 2u : 0u) |
         (std::is_signed<T>::value ? 4u : 0u) | (std::is_enum<T>::value ? 8u : 0u) |
         (std::is_array<T>::value ? 16u : 0u) | (std::is_class<T>::value ? 32u : 0u);
}

#define ABI_SIZE_ROW(T) {#T, "", 0, sizeof(T), 0},
#define ABI_FIELD_ROW(NAME, T, f) \
  {#NAME, #f, offsetof(T, f), sizeof(((T*)0)->f), ::abicompare::kindOf<decltype(T::f)>()},

// Each unit's table, ended by a row with a null type.
extern const Member kHoccl[];
extern const Member kNccl[];
extern const char* const kNcclVersions;  // which versions NCCL's headers had

}  // namespace abicompare
