// Warp-scope TF32 tensor-core product of one K-slice: acc += X_tile(warp rows) · W_tile(warp cols)ᵀ.
//
// K permutation. A dot product does not care in which order k is visited, only that X and W use
// the same order. mma.m16n8k8 gives thread (g, t) the k-slots t and t+4 of each 8-wide step; we
// map, inside a 32-wide K-slice, step s, slot t + 4j  ->  k = 8t + 2s + j. Thread t's k values for
// steps {0, 1} are then k = 8t .. 8t+3 and for steps {2, 3} k = 8t+4 .. 8t+7: one 16-byte chunk
// each, so every fragment comes from one conflict-free LDS.128 (chunk 2t + q of the swizzled row)
// instead of four scalar LDS with their own address arithmetic.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "config.cuh"

namespace ge::sm80 {

template <class Cfg>
struct WarpMma {
    static_assert(Cfg::kTileK == 32, "the K permutation covers exactly one 32-wide slice");

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

    // Float offsets, inside a stage, of the two 16-byte chunks (q = 0, 1) this lane reads from its
    // first X row and its first W row; every other fragment is a compile-time distance away
    // (rows differ by multiples of 8, so the XOR swizzle term is the same for all of them).
    struct LaneOffsets {
        int x[2];
        int w[2];
    };

    __device__ __forceinline__ static LaneOffsets lane_offsets(int warp_m, int warp_n, int lane) {
        const int g = lane >> 2, t = lane & 3;
        LaneOffsets o;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int chunk = ((2 * t + q) ^ g) << 2;  // swizzled 16-byte chunk, in floats
            o.x[q] = (warp_m * Cfg::kWarpM + g) * Cfg::kTileK + chunk;
            o.w[q] = Cfg::kTileM * Cfg::kTileK + (warp_n * Cfg::kWarpN + g) * Cfg::kTileK + chunk;
        }
        return o;
    }

    // One stage: x tile (TILE_M, 32) then w tile (TILE_N, 32), swizzled, starting at `stage`.
    // Operands are rounded to tf32 (nearest) as they leave shared memory.
    __device__ __forceinline__ void step(const float *stage, const LaneOffsets &o) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {  // q: steps {2q, 2q+1}
            float4 a[Cfg::kFragsM][2];  // [m16 fragment][row g / g+8]: k = 8t+4q .. +3
            float4 b[Cfg::kFragsN];     // [n8 fragment]: k = 8t+4q .. +3
#pragma unroll
            for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    a[i][h] = *reinterpret_cast<const float4 *>(
                        stage + o.x[q] + (i * Cfg::kInstM + 8 * h) * Cfg::kTileK);
#pragma unroll
            for (int j = 0; j < Cfg::kFragsN; ++j)
                b[j] = *reinterpret_cast<const float4 *>(stage + o.w[q] + j * Cfg::kInstN * Cfg::kTileK);
#pragma unroll
            for (int s = 0; s < 2; ++s) {  // within the chunk: step 2q+s uses elements 2s, 2s+1
                uint32_t af[Cfg::kFragsM][4];
                uint32_t bf[Cfg::kFragsN][2];
#pragma unroll
                for (int i = 0; i < Cfg::kFragsM; ++i) {
                    af[i][0] = ptx::cvt_rna_tf32(s ? a[i][0].z : a[i][0].x);  // (g,   slot t)
                    af[i][1] = ptx::cvt_rna_tf32(s ? a[i][1].z : a[i][1].x);  // (g+8, slot t)
                    af[i][2] = ptx::cvt_rna_tf32(s ? a[i][0].w : a[i][0].y);  // (g,   slot t+4)
                    af[i][3] = ptx::cvt_rna_tf32(s ? a[i][1].w : a[i][1].y);  // (g+8, slot t+4)
                }
#pragma unroll
                for (int j = 0; j < Cfg::kFragsN; ++j) {
                    bf[j][0] = ptx::cvt_rna_tf32(s ? b[j].z : b[j].x);  // (slot t,   col g)
                    bf[j][1] = ptx::cvt_rna_tf32(s ? b[j].w : b[j].y);  // (slot t+4, col g)
                }
#pragma unroll
                for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
                    for (int j = 0; j < Cfg::kFragsN; ++j) ptx::mma_m16n8k8_tf32(acc[i][j], af[i], bf[j]);
            }
        }
    }
};

}  // namespace ge::sm80
