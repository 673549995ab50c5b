// Catch2 main of the bf16 kernel tests: on a CPU without AVX512_BF16 every test of this binary
// reports itself skipped (exit code 77, CTest SKIP_RETURN_CODE), never passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/kernels/bf16.hpp"

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv)) return rc;
  if (!session.configData().listTests && !session.configData().listTestNamesOnly &&
      !nostrum::kernels::bf16_available()) {
    std::printf("SKIPPED: this CPU lacks AVX512_BF16 (%s)\n",
                nostrum::cpu_features().describe().c_str());
    return 77;
  }
  return session.run();
}
