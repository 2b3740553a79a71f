# Optional dependencies: each is looked for, reported in one line, and used
# only where found. The library builds with none of them (it needs only
# threads and nlohmann-json).
#
# Each has a switch HOCCL_<NAME> = AUTO | ON | OFF: AUTO uses it when found,
# ON fails configure when it is missing, OFF never uses it even when it is
# installed (to build and test what a machine without it gets).
find_package(Threads REQUIRED)

# Required (not optional like the rest): nlohmann-json, header only, reads and
# writes JSON inside the library (json.cc). No public header includes
# it, so the installed package does not depend on it.
find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "hoccl: nlohmann-json 3.10 or newer was not found (Debian: nlohmann-json3-dev)")
endif()
message(STATUS "hoccl: nlohmann-json    : found ${nlohmann_json_VERSION}")

# Declares the switch `var` (a cache string, AUTO by default) and checks its
# value; `what` names the dependency in help texts.
function(hoccl_dependency_switch var what)
  set(${var} AUTO CACHE STRING "Use ${what}: AUTO (when found), ON (required), OFF (never)")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${var}}" _value)
  if(NOT _value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "hoccl: ${var}=\"${${var}}\" is invalid: expected AUTO, ON or OFF")
  endif()
  set(${var} ${_value} PARENT_SCOPE)
endfunction()

# One status line per dependency; with its switch ON, a missing dependency
# stops configure saying what to install. `hint` says what provides it.
function(hoccl_report name var found detail hint)
  if("${${var}}" STREQUAL "OFF")
    message(STATUS "hoccl: ${name} : off (${var}=OFF)")
  elseif(found)
    message(STATUS "hoccl: ${name} : found ${detail}")
  elseif("${${var}}" STREQUAL "ON")
    message(FATAL_ERROR "hoccl: ${var}=ON, but ${hint} was not found")
  else()
    message(STATUS "hoccl: ${name} : not found")
  endif()
endfunction()

find_package(CUDAToolkit QUIET)
set(HOCCL_HAVE_CUDA ${CUDAToolkit_FOUND})
if(CUDAToolkit_FOUND)
  message(STATUS "hoccl: CUDA Toolkit     : found ${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR})")
else()
  message(STATUS "hoccl: CUDA Toolkit     : not found")
endif()

hoccl_dependency_switch(HOCCL_IBVERBS "the verbs headers (the IB transport)")
set(HOCCL_HAVE_IBVERBS OFF)
if(NOT HOCCL_IBVERBS STREQUAL "OFF")
  find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
  find_library(IBVERBS_LIBRARY ibverbs)
  if(IBVERBS_INCLUDE_DIR AND IBVERBS_LIBRARY)
    set(HOCCL_HAVE_IBVERBS ON)
  endif()
endif()
hoccl_report("libibverbs      " HOCCL_IBVERBS "${HOCCL_HAVE_IBVERBS}" "${IBVERBS_LIBRARY}"
             "libibverbs with its headers (Debian: libibverbs-dev)")

hoccl_dependency_switch(HOCCL_HWLOC "hwloc for topology discovery")
set(HOCCL_HAVE_HWLOC OFF)
if(NOT HOCCL_HWLOC STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
    if(HWLOC_FOUND)
      set(HOCCL_HAVE_HWLOC ON)
    endif()
  endif()
endif()
hoccl_report("hwloc           " HOCCL_HWLOC "${HOCCL_HAVE_HWLOC}" "${HWLOC_VERSION}"
             "hwloc through pkg-config (Debian: libhwloc-dev, pkg-config)")

find_package(GTest QUIET)
if(GTest_FOUND)
  message(STATUS "hoccl: GoogleTest       : found ${GTest_VERSION}")
else()
  message(STATUS "hoccl: GoogleTest       : not found")
endif()
if(HOCCL_BUILD_TESTS AND NOT GTest_FOUND)
  message(FATAL_ERROR "hoccl: the tests need GoogleTest (Debian: libgtest-dev), or configure with -DHOCCL_BUILD_TESTS=OFF")
endif()

hoccl_dependency_switch(HOCCL_BENCHMARK "Google Benchmark for the micro-benchmarks (perf/micro)")
set(HOCCL_HAVE_BENCHMARK OFF)
if(NOT HOCCL_BENCHMARK STREQUAL "OFF")
  find_package(benchmark QUIET)
  set(HOCCL_HAVE_BENCHMARK ${benchmark_FOUND})
endif()
hoccl_report("Google Benchmark" HOCCL_BENCHMARK "${HOCCL_HAVE_BENCHMARK}" "${benchmark_VERSION}"
             "Google Benchmark (Debian: libbenchmark-dev)")

hoccl_dependency_switch(HOCCL_MPI "MPI for the perf programs' launcher and mpi_perf")
set(HOCCL_HAVE_MPI OFF)
if(NOT HOCCL_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
  set(HOCCL_HAVE_MPI ${MPI_C_FOUND})
endif()
hoccl_report("MPI             " HOCCL_MPI "${HOCCL_HAVE_MPI}" "${MPI_C_VERSION} ${MPI_C_COMPILER}"
             "MPI for C (Debian: libopenmpi-dev)")

# Gloo is looked for in perf/peers (only the peer benchmark uses it); its
# switch is declared here with the others.
hoccl_dependency_switch(HOCCL_GLOO "Gloo for the peer benchmark gloo_perf")
