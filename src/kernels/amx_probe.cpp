// The AMX tile register probe (amx_probe.hpp): four accumulator tiles, two A and two B operand
// tiles, one tdpbf16ps per accumulator an iteration (a 2 x 2 register block, as oneDNN's brgemm
// keeps its tiles). Compiled with -mamx-tile -mamx-bf16 and called only after a run-time check.
#include "amx_probe.hpp"

#include <immintrin.h>

#include "amx_tile_config.hpp"

namespace nostrum::kernels::amx {

float tile_probe(int64_t iterations) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {  // every tile 16 rows of 64 bytes: 16 fp32 or 16 pairs of bf16
    config.rows[t] = 16;
    config.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&config);
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) {
    a[i] = 0x3f80;  // 1.0
    b[i] = 0x3c00;  // 2^-7
  }
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[4][16 * 16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  _tile_release();
  return c[0][0] + c[1][0] + c[2][0] + c[3][0];
}

}  // namespace nostrum::kernels::amx
