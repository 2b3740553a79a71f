# cmake -P script: compiles the kernels into a fatbin with nvcc, writes the
# source that embeds it, and fails on register spills or local memory
# (stack) in any kernel, from ptxas -v.
#   -DNVCC=... -DSOURCE=x.cu -DOUTPUT=x.fatbin -DLOG=x.log -DFLAGS=a|b|c
#   -DEMBED_TEMPLATE=image_embed.cc.in -DEMBED_OUTPUT=x.cc -DEMBED_ARCHS="sm_80 ..."   compile, embed, check
#   -DCHECK_LOG=x.log                                                       only check a saved log
if(NOT CHECK_LOG)
  string(REPLACE "|" ";" FLAGS "${FLAGS}")
  execute_process(COMMAND ${NVCC} -fatbin ${FLAGS} -o ${OUTPUT} ${SOURCE}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(WRITE ${LOG} "${out}${err}")
  if(NOT rc EQUAL 0)
    file(REMOVE ${OUTPUT})
    message(FATAL_ERROR "nvcc failed (${rc}):\n${out}${err}")
  endif()
  # The source that embeds the fatbin, naming its MD5 so that a compiler
  # cache sees new kernels as a new source.
  file(MD5 ${OUTPUT} md5)
  file(READ ${EMBED_TEMPLATE} embed)
  string(REPLACE "@HOCCL_CUDA_FATBIN@" "${OUTPUT}" embed "${embed}")
  string(REPLACE "@HOCCL_CUDA_EMBED_ARCHS@" "${EMBED_ARCHS}" embed "${embed}")
  string(REPLACE "@HOCCL_CUDA_FATBIN_MD5@" "${md5}" embed "${embed}")
  file(WRITE ${EMBED_OUTPUT} "${embed}")
  set(CHECK_LOG ${LOG})
endif()

file(STRINGS ${CHECK_LOG} lines)
set(entry "")
set(bad "")
set(functions 0)
foreach(line IN LISTS lines)
  if(line MATCHES "Compiling entry function '([^']+)' for '([^']+)'")
    set(entry "${CMAKE_MATCH_1} (${CMAKE_MATCH_2})")
    math(EXPR functions "${functions} + 1")
  elseif(line MATCHES "Function properties for ([^ ]+)" AND NOT entry)
    set(entry "${CMAKE_MATCH_1}")
  endif()
  # ptxas: "N bytes stack frame, N bytes spill stores, N bytes spill loads";
  # older ones add "N bytes lmem" to the register line.
  foreach(what "stack frame" "spill stores" "spill loads" "lmem")
    if(line MATCHES "([0-9]+) bytes ${what}" AND NOT CMAKE_MATCH_1 EQUAL 0)
      list(APPEND bad "${entry}: ${CMAKE_MATCH_1} bytes ${what}")
    endif()
  endforeach()
endforeach()
if(functions EQUAL 0)
  message(FATAL_ERROR "${CHECK_LOG}: no 'Compiling entry function' line: was ptxas run with -v?")
endif()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "kernels use local memory (spills or stack), see ${CHECK_LOG}:\n  ${bad}")
endif()
message(STATUS "ptxas: ${functions} kernel compilations, no spills, no stack")
