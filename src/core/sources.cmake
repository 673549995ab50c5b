# core: errors, shapes, arenas, page mappings advised for huge pages, the parameter table type, the
# 64-bit hash, the CPU features table and its NOSTRUM_MAX_ISA cap, the hypervisor's steal time,
# the round trip between the pool's first two threads.
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/arena.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_features.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_features_${NOSTRUM_ARCH}.cpp  # detection: x86_64 or aarch64
  ${CMAKE_CURRENT_LIST_DIR}/error.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hash.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_steal.cpp
  ${CMAKE_CURRENT_LIST_DIR}/isa.cpp
  ${CMAKE_CURRENT_LIST_DIR}/isa_dispatch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/page_memory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pool_round_trip.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cpp
)
