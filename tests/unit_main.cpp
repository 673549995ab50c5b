// Catch2 main for the plain (non-MPI) unit-test binaries.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
