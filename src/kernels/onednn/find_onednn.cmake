# Finds oneDNN 2.x built on OpenMP (Debian 12: libdnnl-dev) and defines the target nostrum_onednn;
# stops the configuration naming the package when it is missing or of another major version.
# oneDNN's CMake config (find_package(dnnl)) is used where it loads; Debian's asks for OpenCL's
# headers (a GPU runtime nostrum never uses, only recommended by the package), so without them the
# header and library are found directly. The kernels use the 2.x API (oneDNN 3 changed it).
find_package(OpenCL QUIET)
if(OpenCL_FOUND)
  find_package(dnnl CONFIG QUIET)
endif()
if(TARGET DNNL::dnnl)
  set(_dnnl_link DNNL::dnnl)
  get_target_property(NOSTRUM_DNNL_INCLUDE_DIR DNNL::dnnl INTERFACE_INCLUDE_DIRECTORIES)
else()
  find_path(NOSTRUM_DNNL_INCLUDE_DIR dnnl.hpp)
  find_library(NOSTRUM_DNNL_LIBRARY dnnl)
  if(NOT NOSTRUM_DNNL_INCLUDE_DIR OR NOT NOSTRUM_DNNL_LIBRARY)
    message(FATAL_ERROR "oneDNN not found (dnnl.hpp: ${NOSTRUM_DNNL_INCLUDE_DIR}, libdnnl: "
      "${NOSTRUM_DNNL_LIBRARY}): install Debian's libdnnl-dev (tools/bootstrap does), or point "
      "CMAKE_PREFIX_PATH at a oneDNN 2.x install")
  endif()
  set(_dnnl_link ${NOSTRUM_DNNL_LIBRARY})
endif()
set(_dnnl_headers "${NOSTRUM_DNNL_INCLUDE_DIR}/oneapi/dnnl")
file(STRINGS "${_dnnl_headers}/dnnl_version.h" _dnnl_major REGEX "^#define DNNL_VERSION_MAJOR ")
file(STRINGS "${_dnnl_headers}/dnnl_version.h" _dnnl_minor REGEX "^#define DNNL_VERSION_MINOR ")
file(STRINGS "${_dnnl_headers}/dnnl_config.h" _dnnl_runtime REGEX "^#define DNNL_CPU_RUNTIME ")
string(REGEX REPLACE ".* ([0-9]+).*" "\\1" _dnnl_major "${_dnnl_major}")
string(REGEX REPLACE ".* ([0-9]+).*" "\\1" _dnnl_minor "${_dnnl_minor}")
if(NOT _dnnl_major EQUAL 2 OR _dnnl_minor LESS 5)
  message(FATAL_ERROR "oneDNN ${_dnnl_major}.${_dnnl_minor} found (${_dnnl_headers}): "
    "nostrum needs oneDNN 2.5 to 2.x (Debian 12's libdnnl-dev is 2.6.3)")
endif()
if(NOT _dnnl_runtime MATCHES "DNNL_RUNTIME_OMP")
  message(FATAL_ERROR "oneDNN at ${_dnnl_headers} is not built on OpenMP "
    "(${_dnnl_runtime}): nostrum needs the OpenMP build, which shares nostrum's thread pool "
    "(Debian's libdnnl-dev is one)")
endif()
add_library(nostrum_onednn INTERFACE)
target_include_directories(nostrum_onednn INTERFACE ${NOSTRUM_DNNL_INCLUDE_DIR})
target_link_libraries(nostrum_onednn INTERFACE ${_dnnl_link})
message(STATUS "oneDNN ${_dnnl_major}.${_dnnl_minor} (${_dnnl_link}, ${_dnnl_headers})")

