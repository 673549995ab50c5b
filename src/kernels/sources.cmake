# kernels: BLAS wrapper and hand-written compute kernels.
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/amx_probe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bf16.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bf16_amx.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bf16_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/blas_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_candidates.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_choice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_selection.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_widening.cpp
  ${CMAKE_CURRENT_LIST_DIR}/direct_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/direct_conv_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fma_probe_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fp32_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fp32_gemm_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/im2col.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pixel_taps_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision_choice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thread_owners.cpp
  ${CMAKE_CURRENT_LIST_DIR}/winograd_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/winograd_conv.cpp
)
# Targets other than x86-64 (aarch64) build without the x86 kernels below; x86_kernels_absent.cpp
# holds their entry points, never reached (their CPU checks are false there) and aborting if they are.
if(NOT NOSTRUM_ARCH STREQUAL "x86_64")
  list(REMOVE_ITEM NOSTRUM_CORE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/amx_probe.cpp
       ${CMAKE_CURRENT_LIST_DIR}/bf16_amx.cpp
       ${CMAKE_CURRENT_LIST_DIR}/bf16_avx512.cpp
       ${CMAKE_CURRENT_LIST_DIR}/direct_conv_avx512.cpp ${CMAKE_CURRENT_LIST_DIR}/fma_probe_avx2.cpp
       ${CMAKE_CURRENT_LIST_DIR}/fp32_gemm_avx512.cpp
       ${CMAKE_CURRENT_LIST_DIR}/winograd_avx512.cpp)
  list(APPEND NOSTRUM_CORE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/x86_kernels_absent.cpp)
endif()
# The AVX-512 kernels only: called after a run-time CPU check (direct_conv.cpp), never -march=native.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/direct_conv_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mfma")
# The fp32 weight-gradient GEMM's AVX-512F loops only: called after a CPU check (fp32_gemm.cpp).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fp32_gemm_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mfma")
# The AVX512_BF16 loops only: called after a run-time CPU check (bf16.cpp).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/bf16_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512bf16;-mfma")
# The Winograd transforms' AVX512_BF16 loops only: called after the candidate's CPU check.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/winograd_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512bf16;-mfma")
# The AMX tile probe only: called after checking AMX_TILE, AMX_BF16 and the tile-data permission.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/amx_probe.cpp
  PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-bf16")
# The AMX tile loops of the bf16 GEMM (tiles, and AVX-512 to combine with C): called only after
# bf16_amx_available() (bf16.cpp).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/bf16_amx.cpp
  PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-bf16;-mavx512f;-mavx512bw;-mavx512vl;-mfma")
# The AVX2 FMA probe of `--precision auto` on CPUs without AVX-512 (precision_choice.cpp checks).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fma_probe_avx2.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
# The conv kernel cache's key holds nostrum's version and a hash of the candidates' code (the
# kernels, oneDNN's wrapper, the conv layer they run in, their headers), so that a choice measured
# on other kernel code is measured again: "0.1.0+kernels.<12 hex digits>". Editing any of those
# files re-runs CMake (CMAKE_CONFIGURE_DEPENDS), which recomputes the hash.
file(GLOB NOSTRUM_KERNEL_CODE CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/*.cpp ${CMAKE_CURRENT_LIST_DIR}/*.hpp
  ${CMAKE_CURRENT_LIST_DIR}/onednn/*.cpp ${CMAKE_CURRENT_LIST_DIR}/onednn/*.hpp
  ${CMAKE_CURRENT_LIST_DIR}/../layers/conv2d.cpp
  ${PROJECT_SOURCE_DIR}/include/nostrum/kernels/*.hpp)
list(SORT NOSTRUM_KERNEL_CODE)
set(NOSTRUM_KERNEL_CODE_TEXT "")
foreach(code_file ${NOSTRUM_KERNEL_CODE})
  file(READ ${code_file} code_text)
  file(RELATIVE_PATH code_name ${PROJECT_SOURCE_DIR} ${code_file})
  string(APPEND NOSTRUM_KERNEL_CODE_TEXT "${code_name}\n${code_text}")
endforeach()
string(SHA256 NOSTRUM_KERNEL_CODE_HASH "${NOSTRUM_KERNEL_CODE_TEXT}")
string(SUBSTRING ${NOSTRUM_KERNEL_CODE_HASH} 0 12 NOSTRUM_KERNEL_CODE_HASH)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${NOSTRUM_KERNEL_CODE})
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/conv_cache.cpp
  PROPERTIES COMPILE_DEFINITIONS
  "NOSTRUM_VERSION_STRING=\"${PROJECT_VERSION}+kernels.${NOSTRUM_KERNEL_CODE_HASH}\"")
