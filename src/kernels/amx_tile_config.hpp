// The 64-byte AMX tile configuration that LDTILECFG reads (palette 1, Intel SDM): shared by the
// tile probe (amx_probe.cpp) and the AMX engine of the bf16 GEMM (bf16_amx.cpp). Private to
// src/kernels.
#pragma once

#include <cstdint>

namespace nostrum::kernels::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

}  // namespace nostrum::kernels::amx
