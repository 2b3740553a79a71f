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

# The CUDA Toolkit (nvcc) compiles the device kernels into a fatbin that is
# embedded in the library (cmake/Cuda.cmake); the driver itself is opened at
# run time, so nothing links cudart or libcuda.
hoccl_dependency_switch(HOCCL_CUDA "the CUDA Toolkit (nvcc) to build the device kernels")
set(HOCCL_CUDA_ARCHS "80;90;100" CACHE STRING "GPU architectures the kernels are compiled for (sm_XX numbers)")
set(HOCCL_HAVE_CUDA OFF)
set(HOCCL_CUDA_DETAIL "")
if(NOT HOCCL_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE)
    set(HOCCL_HAVE_CUDA ON)
    set(HOCCL_CUDA_DETAIL "${CUDAToolkit_VERSION} (${CUDAToolkit_NVCC_EXECUTABLE})")
  endif()
endif()
hoccl_report("CUDA Toolkit    " HOCCL_CUDA "${HOCCL_HAVE_CUDA}" "${HOCCL_CUDA_DETAIL}"
             "the CUDA Toolkit with nvcc (NVIDIA's cuda-toolkit packages; set CUDAToolkit_ROOT)")

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

# The PyTorch process-group backend (bindings/torch) is built for the torch of
# one interpreter, HOCCL_TORCH_PYTHON: by default /usr/bin/python3, whose
# modules Debian's python3-torch installs (a python3 earlier on PATH, from
# pyenv or a venv, usually lacks torch). It needs torch 1.13 (a c10d
# ProcessGroup) or 2.x (a c10d Backend; bindings/torch/torch_compat.h), its
# headers (libtorch-dev) and pybind11.
hoccl_dependency_switch(HOCCL_BUILD_TORCH "the PyTorch process-group backend (bindings/torch)")
set(HOCCL_HAVE_TORCH OFF)
set(HOCCL_TORCH_DETAIL "")
if(HOCCL_SANITIZE OR HOCCL_BUILD_FUZZERS)
  # A sanitized extension cannot load into an unsanitized interpreter.
  if(HOCCL_BUILD_TORCH STREQUAL "ON")
    message(FATAL_ERROR "hoccl: HOCCL_BUILD_TORCH=ON cannot be built with sanitizers or fuzzers")
  endif()
  set(HOCCL_BUILD_TORCH OFF)
endif()
if(NOT HOCCL_BUILD_TORCH STREQUAL "OFF")
  if(NOT HOCCL_TORCH_PYTHON)
    if(EXISTS /usr/bin/python3)
      set(_hoccl_py /usr/bin/python3)
    else()
      find_program(_hoccl_py python3)
    endif()
    set(HOCCL_TORCH_PYTHON "${_hoccl_py}" CACHE FILEPATH "The Python interpreter the torch backend is built for")
  endif()
  # One line each: version, include dirs, library dirs, Python headers,
  # extension suffix, C++11 ABI, whether pytest is there.
  set(_hoccl_probe [=[
import importlib.util, sysconfig, torch
from torch.utils import cpp_extension as ce
print(torch.__version__)
print(",".join(ce.include_paths()))
print(",".join(ce.library_paths()))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(int(importlib.util.find_spec("pytest") is not None))
]=])
  if(HOCCL_TORCH_PYTHON)
    execute_process(COMMAND ${HOCCL_TORCH_PYTHON} -c "${_hoccl_probe}" OUTPUT_VARIABLE _out
                    RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  else()
    set(_rc 1)
  endif()
  if(_rc EQUAL 0)
    string(REPLACE "\n" ";" _lines "${_out}")
    list(GET _lines 0 HOCCL_TORCH_VERSION)
    list(GET _lines 1 _inc)
    list(GET _lines 2 _libdirs)
    list(GET _lines 3 HOCCL_TORCH_PYTHON_INCLUDE)
    list(GET _lines 4 HOCCL_TORCH_EXT_SUFFIX)
    list(GET _lines 5 HOCCL_TORCH_CXX11_ABI)
    list(GET _lines 6 HOCCL_TORCH_HAVE_PYTEST)
    string(REPLACE "," ";" HOCCL_TORCH_INCLUDE_DIRS "${_inc}")
    string(REPLACE "," ";" _libdirs "${_libdirs}")
    find_path(HOCCL_PYBIND11_INCLUDE_DIR pybind11/pybind11.h)
    find_path(HOCCL_TORCH_C10D_INCLUDE torch/csrc/distributed/c10d/ProcessGroup.hpp HINTS ${HOCCL_TORCH_INCLUDE_DIRS})
    foreach(_lib torch torch_cpu c10 torch_python)
      find_library(HOCCL_TORCH_LIB_${_lib} ${_lib} HINTS ${_libdirs})
    endforeach()
    if(NOT HOCCL_TORCH_VERSION MATCHES "^(1\\.13|2)\\.")
      set(HOCCL_TORCH_DETAIL "torch ${HOCCL_TORCH_VERSION}, but the backend is written for 1.13 and 2.x")
    elseif(NOT HOCCL_PYBIND11_INCLUDE_DIR)
      set(HOCCL_TORCH_DETAIL "torch ${HOCCL_TORCH_VERSION} without pybind11 headers")
    elseif(NOT EXISTS "${HOCCL_TORCH_PYTHON_INCLUDE}/Python.h")
      set(HOCCL_TORCH_DETAIL "torch ${HOCCL_TORCH_VERSION} without the Python headers")
    elseif(NOT HOCCL_TORCH_LIB_torch_cpu OR NOT HOCCL_TORCH_LIB_c10 OR NOT HOCCL_TORCH_LIB_torch_python)
      set(HOCCL_TORCH_DETAIL "torch ${HOCCL_TORCH_VERSION} without its C++ libraries")
    elseif(NOT HOCCL_TORCH_C10D_INCLUDE)
      set(HOCCL_TORCH_DETAIL "torch ${HOCCL_TORCH_VERSION} without its C++ headers")
    else()
      set(HOCCL_HAVE_TORCH ON)
      set(HOCCL_TORCH_DETAIL "${HOCCL_TORCH_VERSION} (${HOCCL_TORCH_PYTHON})")
    endif()
  else()
    set(HOCCL_TORCH_DETAIL "no torch in ${HOCCL_TORCH_PYTHON}")
  endif()
  if(NOT HOCCL_HAVE_TORCH)
    set(HOCCL_TORCH_DETAIL "${HOCCL_TORCH_DETAIL}; needs python3-torch libtorch-dev pybind11-dev")
  endif()
endif()
if(HOCCL_HAVE_TORCH)
  hoccl_report("PyTorch backend " HOCCL_BUILD_TORCH ON "${HOCCL_TORCH_DETAIL}" "")
else()
  hoccl_report("PyTorch backend " HOCCL_BUILD_TORCH OFF "" "torch 1.13 or 2.x for the backend (${HOCCL_TORCH_DETAIL})")
  if(NOT HOCCL_BUILD_TORCH STREQUAL "OFF")
    message(STATUS "hoccl:   (${HOCCL_TORCH_DETAIL})")
  endif()
endif()
