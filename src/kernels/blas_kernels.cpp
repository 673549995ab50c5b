// OpenBLAS kernel selection by re-exec with OPENBLAS_CORETYPE (see the header for why), within the
// NOSTRUM_MAX_ISA cap.
#include "nostrum/kernels/blas_kernels.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/gemm.hpp"

namespace nostrum::kernels {

namespace {

bool is_generic_core(const std::string& name) {
  for (const char* generic : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                              "Katmai", "Coppermine", "Northwood", "Banias", "unknown"})
    if (name == generic) return true;
  return false;
}

// The instruction-set level an OpenBLAS core needs, as far as NOSTRUM_MAX_ISA is concerned: its
// AVX-512 cores (Cooperlake adds AVX512_BF16 sbgemm, SapphireRapids AMX) and, for every other
// core (Haswell, Zen, SandyBridge, the generic ones), at most avx2.
Isa blas_core_level(const std::string& name) {
  if (name == "SapphireRapids") return Isa::kAmx;
  if (name == "Cooperlake") return Isa::kAvx512Bf16;
  if (name == "SkylakeX") return Isa::kAvx512;
  return Isa::kAvx2;
}

// The best core the table (after NOSTRUM_MAX_ISA) allows.
const char* best_supported_core(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512cd) return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  return nullptr;
}

// OpenBLAS's core is above the NOSTRUM_MAX_ISA cap (none: never).
bool above_cap(const CpuFeatures& f, const std::string& core) {
  return !f.max_isa.empty() && blas_core_level(core) > f.level();
}

// With OMP_PROC_BIND set, libgomp pins the initial thread to the first place when it loads, before
// main: a re-exec'd process would inherit that one-place mask and run all its threads there (seen
// here: OMP_PROC_BIND=close OMP_PLACES=cores halved nostrum-bench). Give the process back the union
// of the places (they were made from its original mask) before exec.
void restore_affinity_of_all_places() {
  const int places = omp_get_num_places();
  if (places <= 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int p = 0; p < places; ++p) {
    const int n = omp_get_place_num_procs(p);
    if (n <= 0) continue;
    std::vector<int> ids(static_cast<size_t>(n));
    omp_get_place_proc_ids(p, ids.data());
    for (int id : ids)
      if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &set);
  }
  if (CPU_COUNT(&set) > 0) sched_setaffinity(0, sizeof set, &set);
}

bool set_and_not_zero(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && std::strcmp(value, "0") != 0;
}

}  // namespace

void select_blas_kernels(char** argv) {
  const CpuFeatures* table = nullptr;
  try {
    table = &cpu_features();
  } catch (const Error&) {
    return;  // an unknown NOSTRUM_MAX_ISA: the program reports it where it reports option errors
  }
  const CpuFeatures& f = *table;
  const std::string current = blas_core_name();
  const char* user_core = std::getenv("OPENBLAS_CORETYPE");
  if (user_core != nullptr || set_and_not_zero("NOSTRUM_KEEP_BLAS_KERNELS")) {
    // The user's (or site's) choice, kept; said when a cap is set that it exceeds.
    if (above_cap(f, current))
      std::fprintf(stderr,
                   "nostrum: note: OpenBLAS runs its %s kernels, above NOSTRUM_MAX_ISA=%s, as %s "
                   "asks\n",
                   current.c_str(), f.max_isa.c_str(),
                   user_core ? "OPENBLAS_CORETYPE" : "NOSTRUM_KEEP_BLAS_KERNELS=1");
    return;
  }
  // Tests set NOSTRUM_TEST_FORCE_BLAS_REEXEC=1 to take the re-exec path on CPUs OpenBLAS knows.
  if (!set_and_not_zero("NOSTRUM_TEST_FORCE_BLAS_REEXEC") && !is_generic_core(current) &&
      !above_cap(f, current))
    return;
  const char* core = best_supported_core(f);
  if (core == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/1);
  setenv("NOSTRUM_KEEP_BLAS_KERNELS", "1", 1);  // never loop
  restore_affinity_of_all_places();
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the generic kernels, and say so.
  std::fprintf(stderr,
               "nostrum: note: OpenBLAS runs its generic %s kernels on this CPU; set "
               "OPENBLAS_CORETYPE=%s for %s-level speed\n",
               blas_core_name().c_str(), core, core);
}

}  // namespace nostrum::kernels
