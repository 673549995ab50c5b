# layers: forward/backward kernels of every layer ResNets need (NHWC, fp32, OpenMP).
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv2d.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cross_entropy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/global_avg_pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/linear.cpp
  ${CMAKE_CURRENT_LIST_DIR}/max_pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/relu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/residual_add.cpp
)
# The batch norm's row kernels must round alike in every ISA copy and operand type (bf16 read as
# its widened fp32 values gives the fp32 bits): no contracted multiply-adds there.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/batch_norm.cpp
  PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
