# layers: forward/backward of each layer on NHWC activations.
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/conv2d.cpp
)
