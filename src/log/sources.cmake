# log: MLPerf :::MLLOG logger and the Chrome-trace writer (sees only core; no MPI).
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/mllog.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resnet_hyperparameters.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace.cpp
)
