// Catch2 main of the bf16 tests: on a CPU without AVX512_BF16 the tests tagged [any-cpu] (scalar
// rounding, conversion, option parsing: they need no bf16 instruction) still run, and
// every other test reports itself skipped (exit code 77, CTest SKIP_RETURN_CODE), never passed.
// Likewise the tests tagged [amx] (the GEMM's AMX engine) where AMX is not available
// (kernels::bf16_amx_available(): no AMX, no tile-data permission, or NOSTRUM_MAX_ISA below amx):
// the others run, then the binary reports itself skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/kernels/bf16.hpp"

namespace {

// Catch's test-spec escape: a name matches itself only with these characters escaped.
std::string escaped_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == ',' || c == '[' || c == ']' || c == '\\' || c == '*' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv)) return rc;
  const Catch::ConfigData& data = session.configData();
  const bool bf16 = nostrum::kernels::bf16_available();
  const bool amx = nostrum::kernels::bf16_amx_available();
  if (data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters ||
      (bf16 && amx))
    return session.run();

  // Of the selected tests, run those that need nothing this CPU lacks.
  const Catch::IConfig& config = session.config();
  std::vector<std::string> any_cpu;  // the runnable ones
  bool needs_bf16 = false, needs_amx = false;
  for (const Catch::TestCase& test :
       Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config)) {
    const auto& tags = test.getTestCaseInfo().tags;
    const bool tag_any_cpu = std::find(tags.begin(), tags.end(), "any-cpu") != tags.end();
    const bool tag_amx = std::find(tags.begin(), tags.end(), "amx") != tags.end();
    if (tag_any_cpu || (bf16 && !tag_amx))
      any_cpu.push_back(escaped_name(test.name));
    else if (!bf16)
      needs_bf16 = true;
    else
      needs_amx = true;
  }
  const std::string why = nostrum::cpu_features().describe();
  if (!needs_bf16 && !needs_amx) return session.run();
  if (!any_cpu.empty()) {
    Catch::ConfigData only_any_cpu = data;
    std::string names;  // one spec: alternatives separated by commas
    for (const std::string& name : any_cpu) names += (names.empty() ? "" : ",") + name;
    only_any_cpu.testsOrTags = {names};
    session.useConfigData(only_any_cpu);
    if (const int failed = session.run()) return failed;
  }
  if (needs_bf16)
    std::printf("SKIPPED: this CPU lacks AVX512_BF16 (%s)%s\n", why.c_str(),
                any_cpu.empty() ? "" : "; only the [any-cpu] tests above ran");
  else
    std::printf(
        "SKIPPED: the tests tagged [amx] need AMX_TILE, AMX_BF16 and Linux's tile-data "
        "permission (%s)%s\n",
        why.c_str(), any_cpu.empty() ? "" : "; only the tests above ran");
  return 77;
}
