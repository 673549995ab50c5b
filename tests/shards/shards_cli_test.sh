#!/usr/bin/env bash
# nostrum-shards' command line: a conversion, verify and bench run; bad commands, options and an
# existing output fail with a clear message and a non-zero exit. Usage: shards_cli_test.sh BINARY
set -uo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect_error() {  # expect_error "message" command...
  local message=$1; shift
  out=$("$@" 2>&1) && fail "expected failure: $*"
  grep -q -- "$message" <<<"$out" || fail "expected '$message' from: $*; got: $out"
}
"$bin" synthetic -o "$dir/raw" --kind raw --train 64 --val 16 --height 8 --width 8 -q || fail "synthetic raw"
grep -q "^split train 64$" "$dir/raw/manifest.txt" || fail "manifest counts"
"$bin" verify "$dir/raw" | grep "all shards intact (80 samples)" >/dev/null || fail "verify"
"$bin" bench -d "$dir/raw" --batch 8 -j 1,2 --batches 3 | grep "8x8" >/dev/null || fail "bench"
expect_error "not empty" "$bin" synthetic -o "$dir/raw" --kind raw --train 64 --height 8 --width 8 -q
"$bin" synthetic -o "$dir/raw" --kind raw --train 32 --height 8 --width 8 -q --overwrite || fail "overwrite"
expect_error "unknown command 'frobnicate'" "$bin" frobnicate
expect_error "unrecognised option\|unrecognized option" "$bin" synthetic -o "$dir/x" --colour blue
expect_error "unknown kind 'png'" "$bin" synthetic -o "$dir/x" --kind png
expect_error "no train/ folder" "$bin" imagenet -i "$dir/nowhere" -o "$dir/y"
expect_error "idx file not found" "$bin" fashion-mnist -i "$dir/nowhere" -o "$dir/z"
"$bin" --help | grep "fashion-mnist" >/dev/null || fail "help"
echo "PASS"
