// NOSTRUM_ISA_CLONES: a hot loop compiled for AVX-512, AVX2 and baseline x86-64, the copy picked at
// load time (GCC target_clones; no -march=native); on other targets (aarch64) the one baseline
// build.
#pragma once

#if defined(__x86_64__)
#define NOSTRUM_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NOSTRUM_ISA_CLONES
#endif
