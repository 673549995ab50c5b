# data: the distributed sampler, the sample-keyed RNG and the augmentation maths (no HDF5, no JPEG).
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/augment.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sampler.cpp
)
