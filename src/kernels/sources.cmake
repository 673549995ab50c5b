# kernels: BLAS wrapper and hand-written compute kernels.
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/bf16.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bf16_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/blas_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_candidates.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_choice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_selection.cpp
  ${CMAKE_CURRENT_LIST_DIR}/direct_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/direct_conv_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fma_probe_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/im2col.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision_choice.cpp
)
# Targets other than x86-64 (aarch64) build without the x86 kernels below; x86_kernels_absent.cpp
# holds their entry points, never reached (their CPU checks are false there) and aborting if they are.
if(NOT NOSTRUM_ARCH STREQUAL "x86_64")
  list(REMOVE_ITEM NOSTRUM_CORE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/bf16_avx512.cpp
       ${CMAKE_CURRENT_LIST_DIR}/direct_conv_avx512.cpp ${CMAKE_CURRENT_LIST_DIR}/fma_probe_avx2.cpp)
  list(APPEND NOSTRUM_CORE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/x86_kernels_absent.cpp)
endif()
# The AVX-512 kernels only: called after a run-time CPU check (direct_conv.cpp), never -march=native.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/direct_conv_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mfma")
# The AVX512_BF16 loops only: called after a run-time CPU check (bf16.cpp).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/bf16_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512bf16;-mfma")
# The AVX2 FMA probe of `--precision auto` on CPUs without AVX-512 (precision_choice.cpp checks).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fma_probe_avx2.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
# The conv kernel cache's key holds nostrum's version.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/conv_cache.cpp
  PROPERTIES COMPILE_DEFINITIONS "NOSTRUM_VERSION_STRING=\"${PROJECT_VERSION}\"")
