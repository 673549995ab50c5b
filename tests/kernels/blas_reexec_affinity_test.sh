#!/usr/bin/env bash
# kernels::select_blas_kernels re-executes nostrum-train and the benchmarks with OPENBLAS_CORETYPE
# set where OpenBLAS picked a generic core. With OMP_PROC_BIND set, libgomp has already pinned the
# initial thread to one place by then; the re-exec'd process must still get every CPU: each of the
# OMP_DISPLAY_ENV reports (one per exec) lists the same places. NOSTRUM_TEST_FORCE_BLAS_REEXEC=1
# takes the re-exec path also where OpenBLAS knows the CPU; only a CPU with neither AVX2 + FMA nor
# AVX-512 (nothing to switch to) reports itself skipped (77). Usage: THIS path/to/nostrum-bench
# [CORE]: the core the re-exec must switch to (default: Haswell or SkylakeX, as the CPU allows; the
# NOSTRUM_MAX_ISA=avx2 run asks for Haswell).
set -euo pipefail
bench=$1
core=${2:-Haswell|SkylakeX}
out=$(env -u OPENBLAS_CORETYPE -u NOSTRUM_KEEP_BLAS_KERNELS NOSTRUM_TEST_FORCE_BLAS_REEXEC=1 \
  OMP_DISPLAY_ENV=true \
  OMP_PROC_BIND=close OMP_PLACES=cores OMP_NUM_THREADS=2 \
  "$bench" --model resnet8 --image 8x8x1 --batch 4 --classes 10 --threads 2 --steps 1 2>&1)
places=$(printf '%s\n' "$out" | sed -n "s/^ *OMP_PLACES = '\(.*\)'$/\1/p")
reports=$(printf '%s\n' "$places" | grep -c . || true)
echo "OMP_PLACES reports: $reports"
printf '%s\n' "$places"
[ "$reports" -ge 1 ] || { echo "FAIL: no OMP_DISPLAY_ENV report"; exit 1; }
if [ "$reports" -eq 1 ]; then
  # No AVX2 + FMA, no AVX-512: nothing re-executed, there is no second report to compare with.
  echo "SKIP: no re-exec on this CPU (no AVX2 + FMA or AVX-512 kernels to switch to)"
  exit 77
fi
if [ "$(printf '%s\n' "$places" | sort -u | wc -l)" -ne 1 ]; then
  echo "FAIL: the re-exec'd process lost CPUs (places differ between the reports)"
  exit 1
fi
grep -q '"images_per_second"' <<<"$out" || { echo "FAIL: no result line"; exit 1; }
grep -Eq "\"openblas_core\": \"($core)\"" <<<"$out" ||
  { echo "FAIL: the re-exec'd process does not run the kernels it switched to"; exit 1; }
echo "PASS"
