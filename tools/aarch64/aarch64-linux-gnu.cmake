# CMake toolchain file: nostrum for aarch64 Linux, from an x86-64 Debian 12 host with Debian's cross
# compiler (g++-aarch64-linux-gnu) against the arm64 sysroot of tools/aarch64/make-sysroot; arm64
# binaries (tests, test discovery) run under qemu-aarch64-static -L <sysroot>, no binfmt needed.
# -DNOSTRUM_AARCH64_SYSROOT=<dir> picks the sysroot (default: build-aarch64/sysroot of the source).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT NOSTRUM_AARCH64_SYSROOT)
  get_filename_component(NOSTRUM_AARCH64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../../build-aarch64/sysroot"
                         ABSOLUTE)
endif()
set(NOSTRUM_AARCH64_SYSROOT "${NOSTRUM_AARCH64_SYSROOT}" CACHE PATH
    "The arm64 Debian 12 sysroot (tools/aarch64/make-sysroot)")
if(NOT EXISTS "${NOSTRUM_AARCH64_SYSROOT}/usr/include/cpu_features/cpuinfo_aarch64.h")
  message(FATAL_ERROR "no arm64 sysroot at ${NOSTRUM_AARCH64_SYSROOT}: make it with "
                      "tools/aarch64/make-sysroot (or set -DNOSTRUM_AARCH64_SYSROOT=<dir>)")
endif()
# Try-compile projects (CheckCXXSourceCompiles, FindOpenMP) re-read this file: pass the sysroot on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES NOSTRUM_AARCH64_SYSROOT)
set(CMAKE_SYSROOT "${NOSTRUM_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${NOSTRUM_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# pkg-config (libturbojpeg) reads the sysroot's .pc files, with the sysroot prefixed to their paths.
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_LIBDIR}
    "${NOSTRUM_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${NOSTRUM_AARCH64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${NOSTRUM_AARCH64_SYSROOT}")

# Open MPI and HDF5 are found without their compiler wrappers (the host's would name x86 paths);
# cache entries, as FindMPI and FindHDF5 declare them so.
set(_lib "${NOSTRUM_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu")
set(MPI_C_COMPILER aarch64-linux-gnu-gcc CACHE FILEPATH "")
set(MPI_CXX_COMPILER aarch64-linux-gnu-g++ CACHE FILEPATH "")
set(MPI_C_COMPILER_INCLUDE_DIRS "${_lib}/openmpi/include" CACHE STRING "")
set(MPI_CXX_COMPILER_INCLUDE_DIRS "${_lib}/openmpi/include" CACHE STRING "")
set(MPI_C_LIB_NAMES mpi CACHE STRING "")
set(MPI_CXX_LIB_NAMES mpi CACHE STRING "")
set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "")
set(MPI_mpi_LIBRARY "${_lib}/libmpi.so" CACHE FILEPATH "")
set(MPIEXEC_EXECUTABLE "${NOSTRUM_AARCH64_SYSROOT}/usr/bin/orterun" CACHE FILEPATH "")
set(HDF5_C_COMPILER_EXECUTABLE HDF5_C_COMPILER_EXECUTABLE-NOTFOUND CACHE FILEPATH "")
set(HDF5_C_INCLUDE_DIR "${NOSTRUM_AARCH64_SYSROOT}/usr/include/hdf5/serial" CACHE STRING "")
set(HDF5_C_LIBRARY_hdf5 "${_lib}/libhdf5_serial.so" CACHE FILEPATH "")
set(HDF5_PREFER_PARALLEL OFF CACHE BOOL "")

# arm64 programs run under user-mode QEMU with the sysroot's loader and libraries (CTest, Catch2's
# test discovery, add_test of a target).
find_program(NOSTRUM_QEMU_AARCH64 qemu-aarch64-static qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${NOSTRUM_QEMU_AARCH64};-L;${NOSTRUM_AARCH64_SYSROOT}")
