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
