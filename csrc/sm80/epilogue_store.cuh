// The epilogue: applies the functor to each accumulator and stores the tile once, either
//   store_tile         warp scope, straight from the mma D fragments: each thread owns pairs of
//                      adjacent columns, so a warp store writes 8 rows x 32 bytes (float2);
//   store_tile_staged  CTA scope, through shared memory: the warps write their fragments into the
//                      idle stage buffers as a row-major CTA tile, then every thread stores whole
//                      16-byte chunks along out's rows (a warp: 512 contiguous bytes).
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "warp_mma.cuh"

namespace ge::sm80 {

template <class Cfg, class Epilogue>
__device__ __forceinline__ void store_tile(const WarpMma<Cfg> &mma, const Epilogue &epi, const GeProblem &p, int m0,
                                           int n0, int warp_m, int warp_n, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const bool pairs = (p.ldo % 2 == 0) && (reinterpret_cast<uintptr_t>(p.out) % 8 == 0);
#pragma unroll
    for (int j = 0; j < Cfg::FRAGS_N; ++j) {
        const int col = n0 + warp_n * Cfg::WARP_N + j * Cfg::INST_N + 2 * t;
        const bool c0 = col < p.n, c1 = col + 1 < p.n;
        const float b0 = c0 ? epi.bias_at(col) : 0.0f;
        const float b1 = c1 ? epi.bias_at(col + 1) : 0.0f;
#pragma unroll
        for (int i = 0; i < Cfg::FRAGS_M; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // h = 0: row g, h = 1: row g + 8
                const int row = m0 + warp_m * Cfg::WARP_M + i * Cfg::INST_M + g + 8 * h;
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

// The CTA tile in shared memory, (TILE_M, TILE_N) fp32 over the idle stage buffers: row r,
// 16-byte chunk c (of TILE_N / 4) at chunk c ^ (r % 8) of the row, so the fragment writes (8 rows
// x 2 chunks per warp store) and the row-wise reads both hit 8 distinct chunk positions per 128
// bytes: no bank conflicts.
template <class Cfg>
__device__ __forceinline__ int staged_offset(int row, int col) {
    return row * Cfg::TILE_N + ((((col >> 2) ^ (row & 7))) << 2) + (col & 3);
}

// Call after the mainloop with no cp.async in flight; `smem` is the stage buffers. kSeed: the
// tile holds out's values (the functor's operator()); else it holds v (linear()), and the
// row-wise pass runs finish() per element in a rolled loop, reading C along out's rows.
template <class Cfg, bool kSeed, class Epilogue>
__device__ __forceinline__ void store_tile_staged(const WarpMma<Cfg> &mma, const Epilogue &epi, const GeProblem &p,
                                                  float *smem, int m0, int n0, int warp_m, int warp_n, int lane,
                                                  int tid) {
    static_assert(Cfg::TILE_M * Cfg::TILE_N * 4 <= Cfg::SMEM_BYTES, "the CTA tile fits in the stage buffers");
    const int g = lane >> 2, t = lane & 3;
    __syncthreads();  // every warp is done reading its last fragments from the stages
#pragma unroll
    for (int j = 0; j < Cfg::FRAGS_N; ++j) {
        const int col = warp_n * Cfg::WARP_N + j * Cfg::INST_N + 2 * t;  // in the tile
        const float b0 = n0 + col < p.n ? epi.bias_at(n0 + col) : 0.0f;
        const float b1 = n0 + col + 1 < p.n ? epi.bias_at(n0 + col + 1) : 0.0f;
#pragma unroll
        for (int i = 0; i < Cfg::FRAGS_M; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = warp_m * Cfg::WARP_M + i * Cfg::INST_M + g + 8 * h;
                const float a0 = mma.acc[i][j][2 * h], a1 = mma.acc[i][j][2 * h + 1];
                *reinterpret_cast<float2 *>(smem + staged_offset<Cfg>(row, col)) =
                    kSeed ? make_float2(epi(a0, b0), epi(a1, b1)) : make_float2(epi.linear(a0, b0), epi.linear(a1, b1));
            }
        }
    }
    __syncthreads();
    constexpr int kChunksPerRow = Cfg::TILE_N / 4;
    if constexpr (!kSeed) {
#pragma unroll 1
        for (int q = tid; q < Cfg::TILE_M * kChunksPerRow; q += Cfg::THREADS) {
            const int row = q / kChunksPerRow, col = (q % kChunksPerRow) * 4;
            if (m0 + row >= p.m || n0 + col >= p.n) continue;
            const float4 v = *reinterpret_cast<const float4 *>(smem + staged_offset<Cfg>(row, col));
            float *dst = p.out + int64_t(m0 + row) * p.ldo + n0 + col;
#pragma unroll 1
            for (int c = 0; c < 4; ++c) {
                const float e = c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;  // no local array
                if (n0 + col + c < p.n) dst[c] = epi.finish_at(e, m0 + row, n0 + col + c);
            }
        }
        return;
    }
    const bool vec4 = (p.ldo % 4 == 0) && (reinterpret_cast<uintptr_t>(p.out) % 16 == 0);
#pragma unroll 4
    for (int q = tid; q < Cfg::TILE_M * kChunksPerRow; q += Cfg::THREADS) {
        const int row = q / kChunksPerRow, col = (q % kChunksPerRow) * 4;
        if (m0 + row >= p.m || n0 + col >= p.n) continue;
        const float4 v = *reinterpret_cast<const float4 *>(smem + staged_offset<Cfg>(row, col));
        float *dst = p.out + int64_t(m0 + row) * p.ldo + n0 + col;
        if (vec4 && n0 + col + 3 < p.n) {
            *reinterpret_cast<float4 *>(dst) = v;
        } else {
            const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int c = 0; c < 4; ++c)
                if (n0 + col + c < p.n) dst[c] = e[c];
        }
    }
}

}  // namespace ge::sm80
