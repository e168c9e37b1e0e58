// Warp-scope epilogue: applies the functor to this warp's accumulators and stores them once.
// Each thread owns pairs of adjacent columns (mma D fragment), so a row segment of a warp is
// 8 consecutive floats: 32-byte sectors, written as float2 where `out` allows.
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "warp_mma.cuh"

namespace ge::sm80 {

template <class Cfg, class Epilogue>
__device__ __forceinline__ void store_tile(const WarpMma<Cfg> &mma, const Epilogue &epi,
                                           const GeProblem &p, int m0, int n0, int warp_m,
                                           int warp_n, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const bool pairs = (p.ldo % 2 == 0) && (reinterpret_cast<uintptr_t>(p.out) % 8 == 0);
#pragma unroll
    for (int j = 0; j < Cfg::kFragsN; ++j) {
        const int col = n0 + warp_n * Cfg::kWarpN + j * Cfg::kInstN + 2 * t;
        const bool c0 = col < p.n, c1 = col + 1 < p.n;
        const float b0 = c0 ? epi.bias_at(col) : 0.0f;
        const float b1 = c1 ? epi.bias_at(col + 1) : 0.0f;
#pragma unroll
        for (int i = 0; i < Cfg::kFragsM; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // h = 0: row g, h = 1: row g + 8
                const int row = m0 + warp_m * Cfg::kWarpM + i * Cfg::kInstM + g + 8 * h;
                if (row >= p.m) continue;
                const float v0 = epi(mma.acc[i][j][2 * h], b0);
                const float v1 = epi(mma.acc[i][j][2 * h + 1], b1);
                float *dst = p.out + int64_t(row) * p.ldo + col;
                if (pairs && c1) {
                    *reinterpret_cast<float2 *>(dst) = make_float2(v0, v1);
                } else {
                    if (c0) dst[0] = v0;
                    if (c1) dst[1] = v1;
                }
            }
        }
    }
}

}  // namespace ge::sm80
