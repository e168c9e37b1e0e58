// Warp-scope TF32 tensor-core product of one K-slice: acc += X_tile(warp rows) * W_tile(warp cols)^T.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "config.cuh"
#include "smem_tile.cuh"

namespace ge::sm80 {

template <class Cfg>
struct WarpMma {
    // (kFragsM x m16, kFragsN x n8) accumulators of this warp, in mma's D-fragment order.
    float acc[Cfg::kFragsM][Cfg::kFragsN][4];

    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
            for (int j = 0; j < Cfg::kFragsN; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }

    // x_tile: (TILE_M, 32) swizzled, w_tile: (TILE_N, 32) swizzled, one stage.
    // Operands are rounded to tf32 (nearest) as they leave shared memory.
    __device__ __forceinline__ void step(const float *x_tile, const float *w_tile, int warp_m,
                                         int warp_n, int lane) {
        const int g = lane >> 2, t = lane & 3;
        const int row_base = warp_m * Cfg::kWarpM + g;
        const int col_base = warp_n * Cfg::kWarpN + g;
#pragma unroll
        for (int kk = 0; kk < Cfg::kTileK; kk += Cfg::kInstK) {
            uint32_t a[Cfg::kFragsM][4];
            uint32_t b[Cfg::kFragsN][2];
#pragma unroll
            for (int i = 0; i < Cfg::kFragsM; ++i) {
                const int r = row_base + i * Cfg::kInstM;
                a[i][0] = ptx::cvt_rna_tf32(x_tile[swizzled_offset(r, kk + t)]);
                a[i][1] = ptx::cvt_rna_tf32(x_tile[swizzled_offset(r + 8, kk + t)]);
                a[i][2] = ptx::cvt_rna_tf32(x_tile[swizzled_offset(r, kk + t + 4)]);
                a[i][3] = ptx::cvt_rna_tf32(x_tile[swizzled_offset(r + 8, kk + t + 4)]);
            }
#pragma unroll
            for (int j = 0; j < Cfg::kFragsN; ++j) {
                const int n = col_base + j * Cfg::kInstN;
                b[j][0] = ptx::cvt_rna_tf32(w_tile[swizzled_offset(n, kk + t)]);
                b[j][1] = ptx::cvt_rna_tf32(w_tile[swizzled_offset(n, kk + t + 4)]);
            }
#pragma unroll
            for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
                for (int j = 0; j < Cfg::kFragsN; ++j) ptx::mma_m16n8k8_tf32(acc[i][j], a[i], b[j]);
        }
    }
};

}  // namespace ge::sm80
