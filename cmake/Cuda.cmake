# The device kernels (src/exec/cuda/*.cu): nvcc compiles them into one fatbin
# for HOCCL_CUDA_ARCHS, and the library embeds it (.incbin in a generated
# source), so libhoccl.so carries its kernels and links neither cudart nor
# libcuda: the driver is opened at run time (src/base/cuda_driver.h).
# Sets HOCCL_CUDA_SOURCES (what hoccl_obj compiles for the image) and
# HOCCL_CUDA_BUILT (a line for configure's report and hoccl-info).
set(_hoccl_cuda_dir ${CMAKE_CURRENT_SOURCE_DIR}/src/exec/cuda)
if(NOT HOCCL_HAVE_CUDA)
  set(HOCCL_CUDA_SOURCES ${_hoccl_cuda_dir}/image_none.cc)
  set(HOCCL_CUDA_ARCHS_BUILT "")
  if(HOCCL_CUDA STREQUAL "OFF")
    set(HOCCL_CUDA_BUILT "not built (HOCCL_CUDA=OFF)")
  else()
    set(HOCCL_CUDA_BUILT "not built (no CUDA Toolkit)")
  endif()
  message(STATUS "hoccl: CUDA kernels     : ${HOCCL_CUDA_BUILT}")
  return()
endif()

# -gencode per architecture: machine code for each, plus the PTX of the
# newest so that a later GPU can compile it at load time.
set(_gencode "")
set(_names "")
set(_last "")
foreach(arch IN LISTS HOCCL_CUDA_ARCHS)
  if(NOT arch MATCHES "^[0-9]+[af]?$")
    message(FATAL_ERROR "hoccl: HOCCL_CUDA_ARCHS=\"${HOCCL_CUDA_ARCHS}\": \"${arch}\" is not an sm number "
                        "such as 80 or 90 (native and all-major need a GPU or CMake's CUDA language)")
  endif()
  list(APPEND _gencode -gencode arch=compute_${arch},code=sm_${arch})
  list(APPEND _names sm_${arch})
  set(_last ${arch})
endforeach()
if(NOT _last)
  message(FATAL_ERROR "hoccl: HOCCL_CUDA_ARCHS is empty; name at least one sm number, or set HOCCL_CUDA=OFF")
endif()
list(APPEND _gencode -gencode arch=compute_${_last},code=compute_${_last})
string(REPLACE ";" " " _names "${_names}")
set(HOCCL_CUDA_ARCHS_BUILT "${_names} + PTX compute_${_last}")

# -fmad=false: the kernels must round as the host's data ops do (results are
# compared bit for bit). -Xptxas -v: the script fails on spills and stack.
# Warnings are always errors here (not only with HOCCL_WERROR): the kernels
# are few and ours, and a warning from nvcc or ptxas is worth stopping for.
set(_flags -std=c++20 -O3 -fmad=false -Xptxas -v -Werror all-warnings -I${CMAKE_CURRENT_SOURCE_DIR})
file(GLOB _cuda_inputs CONFIGURE_DEPENDS ${_hoccl_cuda_dir}/*.cu ${_hoccl_cuda_dir}/*.cuh ${_hoccl_cuda_dir}/*.h)
set(_fatbin ${CMAKE_CURRENT_BINARY_DIR}/generated/hoccl_kernels.fatbin)
set(_ptxas_log ${CMAKE_CURRENT_BINARY_DIR}/generated/hoccl_kernels.ptxas.log)
# "|" between flags: a ";" would split the -D argument into several.
string(REPLACE ";" "|" _flag_arg "${_flags};${_gencode}")
# The script also writes the source that embeds the fatbin, with the
# fatbin's MD5 in it: .incbin is invisible to the compiler's dependency scan
# and to ccache, which would otherwise hand back an object holding the
# previous kernels.
set(_embed ${CMAKE_CURRENT_BINARY_DIR}/generated/hoccl_kernel_image.cc)
add_custom_command(
  OUTPUT ${_fatbin} ${_embed}
  COMMAND ${CMAKE_COMMAND} "-DNVCC=${CUDAToolkit_NVCC_EXECUTABLE}" "-DSOURCE=${_hoccl_cuda_dir}/kernels.cu"
          "-DOUTPUT=${_fatbin}" "-DLOG=${_ptxas_log}" "-DFLAGS=${_flag_arg}"
          "-DEMBED_TEMPLATE=${_hoccl_cuda_dir}/image_embed.cc.in" "-DEMBED_OUTPUT=${_embed}"
          "-DEMBED_ARCHS=${HOCCL_CUDA_ARCHS_BUILT}"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/cuda_fatbin.cmake
  DEPENDS ${_cuda_inputs} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/cuda_fatbin.cmake ${_hoccl_cuda_dir}/image_embed.cc.in
  COMMENT "nvcc: device kernels for ${HOCCL_CUDA_ARCHS_BUILT} (fatbin, spills checked)"
  VERBATIM)
set(HOCCL_CUDA_SOURCES ${_embed})
set(HOCCL_CUDA_BUILT "kernels for ${HOCCL_CUDA_ARCHS_BUILT}, nvcc ${CUDAToolkit_VERSION}, embedded (no cudart/libcuda link)")
message(STATUS "hoccl: CUDA kernels     : ${HOCCL_CUDA_BUILT}")
