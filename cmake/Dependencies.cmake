# Optional dependencies: each is looked for, reported in one line, and used
# only where found. The library builds with none of them.
find_package(Threads REQUIRED)

function(hoccl_report name found detail)
  if(found)
    message(STATUS "hoccl: ${name} : found ${detail}")
  else()
    message(STATUS "hoccl: ${name} : not found")
  endif()
endfunction()

find_package(CUDAToolkit QUIET)
set(HOCCL_HAVE_CUDA ${CUDAToolkit_FOUND})
hoccl_report("CUDA Toolkit    " "${CUDAToolkit_FOUND}" "${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR})")

find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
find_library(IBVERBS_LIBRARY ibverbs)
if(IBVERBS_INCLUDE_DIR AND IBVERBS_LIBRARY)
  set(HOCCL_HAVE_IBVERBS ON)
else()
  set(HOCCL_HAVE_IBVERBS OFF)
endif()
hoccl_report("libibverbs      " "${HOCCL_HAVE_IBVERBS}" "${IBVERBS_LIBRARY}")

find_package(PkgConfig QUIET)
set(HOCCL_HAVE_HWLOC OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
  if(HWLOC_FOUND)
    set(HOCCL_HAVE_HWLOC ON)
  endif()
endif()
hoccl_report("hwloc           " "${HOCCL_HAVE_HWLOC}" "${HWLOC_VERSION}")

find_package(GTest QUIET)
hoccl_report("GoogleTest      " "${GTest_FOUND}" "${GTest_VERSION}")
if(HOCCL_BUILD_TESTS AND NOT GTest_FOUND)
  message(FATAL_ERROR "hoccl: the tests need GoogleTest (Debian: libgtest-dev), or configure with -DHOCCL_BUILD_TESTS=OFF")
endif()

find_package(benchmark QUIET)
hoccl_report("Google Benchmark" "${benchmark_FOUND}" "${benchmark_VERSION}")

find_package(MPI QUIET COMPONENTS C)
hoccl_report("MPI             " "${MPI_C_FOUND}" "${MPI_C_VERSION} ${MPI_C_COMPILER}")
