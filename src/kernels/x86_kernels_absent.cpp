// The x86 kernels' entry points on targets without them (aarch64): the callers take these paths
// only after a CPU check that is false there (AVX-512, AVX2), so reaching one is a bug and aborts.
#include <cstdio>
#include <cstdlib>

#include "amx_probe.hpp"
#include "bf16_amx.hpp"
#include "bf16_avx512.hpp"
#include "direct_conv_avx512.hpp"
#include "fma_probe_avx2.hpp"
#include "fp32_gemm_avx512.hpp"
#include "winograd_avx512.hpp"

namespace nostrum::kernels {

namespace {

[[noreturn]] void x86_only(const char* kernel) {
  std::fprintf(stderr, "nostrum: internal error: the x86 kernel %s called in a build without it\n",
               kernel);
  std::abort();
}

}  // namespace

namespace avx512 {

void conv_rows(float*, const float*, int, const float*, const DirectShape&, int, int, bool) {
  x86_only("avx512::conv_rows");
}
void weight_grad_image(float*, const float*, const float*, const DirectShape&) {
  x86_only("avx512::weight_grad_image");
}
void transpose_row(float*, int64_t, const float*, int, int) {
  x86_only("avx512::transpose_row");
}

}  // namespace avx512

namespace bf16_avx512 {

void convert(uint16_t*, const float*, int64_t) {
  x86_only("bf16_avx512::convert");
}
void rows_to_words(uint32_t*, int64_t, const float*, int64_t, int, int) {
  x86_only("bf16_avx512::rows_to_words");
}
void interleave_rows(uint32_t*, int64_t, const float*, int64_t, int, int) {
  x86_only("bf16_avx512::interleave_rows");
}
void rows_to_words(uint32_t*, int64_t, const uint16_t*, int64_t, int, int) {
  x86_only("bf16_avx512::rows_to_words");
}
void interleave_rows(uint32_t*, int64_t, const uint16_t*, int64_t, int, int) {
  x86_only("bf16_avx512::interleave_rows");
}
void pack_b_rows(uint32_t*, int, const float*, int64_t, int, int, int, int) {
  x86_only("bf16_avx512::pack_b_rows");
}
void pack_b_rows(uint32_t*, int, const uint16_t*, int64_t, int, int, int, int) {
  x86_only("bf16_avx512::pack_b_rows");
}
void interleave_rows_transposed(uint32_t*, int64_t, const float*, int64_t, int, int) {
  x86_only("bf16_avx512::interleave_rows_transposed");
}
void interleave_rows_transposed(uint32_t*, int64_t, const uint16_t*, int64_t, int, int) {
  x86_only("bf16_avx512::interleave_rows_transposed");
}
void pack_b_columns(uint32_t*, int, const float*, int64_t, int, int, int, int) {
  x86_only("bf16_avx512::pack_b_columns");
}
void gemm_block(float*, int64_t, const uint32_t*, bool, const PackedB&, int, int, int, int, int,
                float, float, bool, const Prefetch&) {
  x86_only("bf16_avx512::gemm_block");
}
float dot_probe(int64_t) {
  x86_only("bf16_avx512::dot_probe");
}
float fma_probe(int64_t) {
  x86_only("bf16_avx512::fma_probe");
}

}  // namespace bf16_avx512

namespace fp32_avx512 {

void pack_b(float*, const float*, int64_t, int, int, int, int) {
  x86_only("fp32_avx512::pack_b");
}
void block(float*, int64_t, const float*, int64_t, const float*, int64_t, int, int, int, float,
           bool) {
  x86_only("fp32_avx512::block");
}

}  // namespace fp32_avx512

namespace bf16_amx {

void gemm_block(float*, int64_t, const uint32_t*, const bf16_avx512::PackedB&, int, int, int, int,
                int, float, float, bool) {
  x86_only("bf16_amx::gemm_block");
}
void release() {
  x86_only("bf16_amx::release");
}

}  // namespace bf16_amx

namespace amx {

float tile_probe(int64_t) {
  x86_only("amx::tile_probe");
}

}  // namespace amx

namespace avx2 {

double fma_probe_seconds(int64_t) {
  x86_only("avx2::fma_probe_seconds");
}

}  // namespace avx2

namespace winograd_avx512 {

void transform_weights(uint32_t*, const float*, const Shape&, bool, int, int) {
  x86_only("winograd_avx512::transform_weights");
}
TileWords a_block_words(int, int) {
  x86_only("winograd_avx512::a_block_words");
}
TileWords matrix_words(int64_t, int) {
  x86_only("winograd_avx512::matrix_words");
}
void transform_input(uint32_t*, const TileWords&, const float*, const uint16_t*, const Shape&,
                     int64_t, int) {
  x86_only("winograd_avx512::transform_input");
}
void transform_gradient(uint32_t*, const TileWords&, const float*, const uint16_t*, const Shape&,
                        int64_t, int) {
  x86_only("winograd_avx512::transform_gradient");
}
void transform_weight_gradient(float*, const float*, const Shape&, int, int) {
  x86_only("winograd_avx512::transform_weight_gradient");
}
void transform_output(float*, uint16_t*, bool, const float*, int, const Shape&, int64_t, int) {
  x86_only("winograd_avx512::transform_output");
}

}  // namespace winograd_avx512

}  // namespace nostrum::kernels
