// Warp-scope TF32 tensor-core product of one K-slice: acc += X_tile(warp rows) · W_tile(warp cols)ᵀ.
//
// K permutation. A dot product does not care in which order k is visited, only that X and W use
// the same order. mma.m16n8k8 gives thread (g, t) the k-slots t and t+4 of each 8-wide step; we
// map, inside a 32-wide K-slice, step s, slot t + 4j  ->  k = 8t + 2s + j. Thread t's k values
// for steps {2q, 2q+1} are then the 16-byte chunk 2t + q of its rows.
//   W (B operand, rows n = g): one LDS.128 of chunk 2t + q gives b for step 2q (.x, .y) and
//     step 2q+1 (.z, .w).
//   X (A operand, rows g and g+8): the tile is stored with row pairs interleaved
//     (TileOrder::RowPairsInterleaved), so one LDS.128 of chunk 2t + q of row g (steps 2q) or row
//     g+8 (step 2q+1) is exactly the fragment {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]} in
//     the register order mma wants: no register shuffling between the loads and the mma.
// Both reads are conflict-free: lanes g = 0..7 see swizzled chunks (2t + q) ^ g, all distinct.
// The tiles were rounded to TF32 when they landed (SmemTileLoader::finish).
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "config.cuh"
#include "smem_tile.cuh"

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

    // Float offsets, inside a stage, of chunk 2t + q (q = 0, 1) of this lane's first X row and
    // first W row; every other fragment is a compile-time distance away (rows differ by
    // multiples of 8, so the XOR swizzle term is the same for all of them).
    struct LaneOffsets {
        int x[2];
        int w[2];
    };

    __device__ __forceinline__ static LaneOffsets lane_offsets(int warp_m, int warp_n, int lane) {
        const int g = lane >> 2, t = lane & 3;
        LaneOffsets o;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            o.x[q] = chunk_offset(warp_m * Cfg::kWarpM + g, 2 * t + q);
            o.w[q] = Cfg::kTileM * Cfg::kTileK + chunk_offset(warp_n * Cfg::kWarpN + g, 2 * t + q);
        }
        return o;
    }

    // One stage: x tile (TILE_M, 32), row pairs interleaved, then w tile (TILE_N, 32), both
    // swizzled and already rounded to TF32.
    __device__ __forceinline__ void step(const float *stage, const LaneOffsets &o) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            uint4 b[Cfg::kFragsN];  // [n8 fragment]: slots (t, t+4) of steps 2q (.x .y), 2q+1 (.z .w)
#pragma unroll
            for (int j = 0; j < Cfg::kFragsN; ++j)
                b[j] = *reinterpret_cast<const uint4 *>(stage + o.w[q] + j * Cfg::kInstN * Cfg::kTileK);
#pragma unroll
            for (int s = 0; s < 2; ++s) {  // step 2q + s
                uint32_t a[Cfg::kFragsM][4];
#pragma unroll
                for (int i = 0; i < Cfg::kFragsM; ++i) {
                    const uint4 v = *reinterpret_cast<const uint4 *>(
                        stage + o.x[q] + (i * Cfg::kInstM + 8 * s) * Cfg::kTileK);
                    a[i][0] = v.x, a[i][1] = v.y, a[i][2] = v.z, a[i][3] = v.w;
                }
#pragma unroll
                for (int j = 0; j < Cfg::kFragsN; ++j) {
                    const uint32_t bf[2] = {s ? b[j].z : b[j].x, s ? b[j].w : b[j].y};
#pragma unroll
                    for (int i = 0; i < Cfg::kFragsM; ++i) ptx::mma_m16n8k8_tf32(acc[i][j], a[i], bf);
                }
            }
        }
    }
};

}  // namespace ge::sm80
