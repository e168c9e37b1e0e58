// Warp-scope TF32 tensor-core product of one K-slice: acc += X_tile(warp rows) · W_tile(warp cols)ᵀ.
//
// Fragments come straight from the swizzled stage with ldmatrix.x4 (csrc/common/ptx.cuh): on
// 32-bit data an 8x8 .b16 matrix is 8 rows x 4 floats, and lane l receives float l%4 of row l/4,
// which is exactly mma.m16n8k8's (g, t) ownership. For k-step s (k = 8s .. 8s+7 of the slice):
//   A (X rows r0 .. r0+15):  matrices {rows 0-7, k 8s..+3}, {rows 8-15, k 8s..+3},
//                            {rows 0-7, k 8s+4..+7}, {rows 8-15, k 8s+4..+7}
//                            = {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]}: one m16 A fragment.
//   B (W rows n0 .. n0+15):  matrices {rows 0-7, k 8s..+3}, {rows 0-7, k 8s+4..+7}, and the same
//                            for rows 8-15 = the b fragments {W[g][t], W[g][t+4]} of two n8 tiles.
// Each matrix is 8 rows of one 16-byte chunk; the XOR swizzle (chunk ^ row % 8, smem_tile.cuh)
// puts those 8 chunks in 8 different bank groups, so every ldmatrix phase is conflict-free.
//
// Operands are rounded to TF32 here, in registers (Rounding::Nearest: half an ulp added, so that
// the tensor core's truncation rounds, ptx::add_half_ulp_tf32), or passed as fp32 and truncated
// by the tensor core (Rounding::Truncate). The mainloop (kernel.cuh) double-buffers
// Frags: it loads k-step s+1 while the mma of k-step s issue.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "config.cuh"
#include "smem_tile.cuh"

namespace ge::sm80 {

template <class Cfg>
struct WarpMma {
    static_assert(Cfg::kTileK == 32, "lane offsets cover the 4 k-steps of one 32-wide slice");
    static_assert(Cfg::kFragsN % 2 == 0, "one ldmatrix.x4 loads two n8 B fragments");
    static constexpr int kKSteps = Cfg::kTileK / Cfg::kInstK;

    // (kFragsM x m16, kFragsN x n8) accumulators of this warp, in mma's D-fragment order.
    float acc[Cfg::kFragsM][Cfg::kFragsN][4];

    // The operands of one k-step.
    struct Frags {
        uint32_t a[Cfg::kFragsM][4];
        uint32_t b[Cfg::kFragsN][2];
    };

    // Byte offsets, inside a stage, of the row this lane addresses for ldmatrix at k-step s, for
    // the warp's first A fragment and first B fragment pair. Other fragments are 16 rows (a
    // compile-time distance, same swizzle term) further; the k-step changes the XOR term.
    struct LaneOffsets {
        uint32_t a[kKSteps];
        uint32_t b[kKSteps];
    };

    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
            for (int j = 0; j < Cfg::kFragsN; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }

    __device__ __forceinline__ static LaneOffsets lane_offsets(int warp_m, int warp_n, int lane) {
        const int matrix = lane >> 3, row = lane & 7;
        const int a_row = warp_m * Cfg::kWarpM + row + 8 * (matrix & 1), a_half = matrix >> 1;
        const int b_row = warp_n * Cfg::kWarpN + row + 8 * (matrix >> 1), b_half = matrix & 1;
        LaneOffsets o;
#pragma unroll
        for (int s = 0; s < kKSteps; ++s) {
            o.a[s] = 4 * chunk_offset(a_row, 2 * s + a_half);
            o.b[s] = 4 * (Cfg::kTileM * Cfg::kTileK + chunk_offset(b_row, 2 * s + b_half));
        }
        return o;
    }

    // Loads (and rounds) the fragments of k-step `s` of the stage at shared address `stage`.
    __device__ __forceinline__ static void load(Frags &f, uint32_t stage, const LaneOffsets &o, int s) {
        constexpr uint32_t k16Rows = 16 * Cfg::kTileK * 4;  // bytes
#pragma unroll
        for (int i = 0; i < Cfg::kFragsM; ++i) ptx::ldmatrix_x4(f.a[i], stage + o.a[s] + i * k16Rows);
#pragma unroll
        for (int j = 0; j < Cfg::kFragsN / 2; ++j) {
            uint32_t r[4];
            ptx::ldmatrix_x4(r, stage + o.b[s] + j * k16Rows);
            f.b[2 * j][0] = r[0], f.b[2 * j][1] = r[1];
            f.b[2 * j + 1][0] = r[2], f.b[2 * j + 1][1] = r[3];
        }
        if constexpr (Cfg::kRounding == Rounding::Nearest) {
#pragma unroll
            for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) f.a[i][e] = ptx::add_half_ulp_tf32(f.a[i][e]);
#pragma unroll
            for (int j = 0; j < Cfg::kFragsN; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) f.b[j][e] = ptx::add_half_ulp_tf32(f.b[j][e]);
        }
    }

    // acc += A · B for one k-step, n8 columns [J0, J1) of the warp tile (all by default).
    template <int J0 = 0, int J1 = Cfg::kFragsN>
    __device__ __forceinline__ void mma(const Frags &f) {
#pragma unroll
        for (int j = J0; j < J1; ++j)
#pragma unroll
            for (int i = 0; i < Cfg::kFragsM; ++i) ptx::mma_m16n8k8_tf32(acc[i][j], f.a[i], f.b[j]);
    }
};

}  // namespace ge::sm80
