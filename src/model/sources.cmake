# model: ResNet architectures by name and the Model (build, init, forward, loss, backward).
list(APPEND NOSTRUM_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/architecture.cpp
  ${CMAKE_CURRENT_LIST_DIR}/model.cpp
)
