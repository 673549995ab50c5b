# kernels/onednn: oneDNN's convolution primitives behind nostrum's layouts (the only sources that
# include dnnl.hpp; the library comes from find_onednn.cmake, included by the top-level CMakeLists).
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/onednn_candidates.cpp
  ${CMAKE_CURRENT_LIST_DIR}/onednn_conv.cpp
)
