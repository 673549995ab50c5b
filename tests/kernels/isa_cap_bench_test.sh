#!/usr/bin/env bash
# NOSTRUM_MAX_ISA=avx2 reaches the libraries as well as nostrum's own kernels, in the process that
# nostrum-train and the benchmarks run (kernels::select_blas_kernels' re-exec included): one
# nostrum-bench step reports OpenBLAS's Haswell core, DNNL_MAX_CPU_ISA=AVX2 (or the user's value,
# kept, when one was set) and no kernel dispatch that ran an AVX-512 variant; a CPU without AVX2 +
# FMA reports itself skipped (77). Usage: THIS path/to/nostrum-bench
set -euo pipefail
bench=$1
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo ||
  { echo "SKIP: the CPU lacks AVX2 + FMA: there is no AVX2 path to cap to"; exit 77; }
step() {
  env -u OPENBLAS_CORETYPE -u NOSTRUM_KEEP_BLAS_KERNELS -u NOSTRUM_TEST_FORCE_BLAS_REEXEC "$@" \
    "$bench" --model resnet8 --image 8x8x1 --batch 4 --classes 10 --threads 1 --steps 1 2>&1
}
fail=0
expect() {  # OUTPUT PATTERN WHAT
  if grep -Eq -- "$2" <<<"$1"; then echo "ok: $3"; else echo "FAIL: $3"; fail=1; fi
}
out=$(step -u DNNL_MAX_CPU_ISA NOSTRUM_MAX_ISA=avx2)
printf '%s\n' "$out"
expect "$out" '"openblas_core": "Haswell"' "OpenBLAS runs its Haswell kernels under the avx2 cap"
expect "$out" '"max_isa": "avx2"' "the bench reports the cap"
expect "$out" '"dnnl_max_cpu_isa": "AVX2"' "oneDNN is capped at AVX2"
expect "$out" '"kernels_ran": "[^"]*batch_norm_rows=avx2' "batch norm ran its AVX2 copy"
if grep -q '"kernels_ran": "[^"]*avx512' <<<"$out"; then
  echo "FAIL: a kernel dispatch ran an AVX-512 variant under the avx2 cap"
  fail=1
fi
out=$(step NOSTRUM_MAX_ISA=avx2 DNNL_MAX_CPU_ISA=AVX512_CORE)
printf '%s\n' "$out"
expect "$out" '"dnnl_max_cpu_isa": "AVX512_CORE"' "the user's DNNL_MAX_CPU_ISA is kept"
expect "$out" '"openblas_core": "Haswell"' "... while OpenBLAS is still capped"
exit $fail
