// Warp-scope TF32 tensor-core product of one K-slice: acc += X_tile(warp rows) · W_tile(warp cols)ᵀ.
//
// Fragments come straight from the swizzled stage with ldmatrix.x4 (ptx.cuh): on 32-bit data an
// 8x8 .b16 matrix is 8 rows x 4 floats, and lane l receives float l%4 of row l/4, which is
// exactly mma.m16n8k8's (g, t) ownership. X is the mma's A operand, W its B operand. For k-step s
// (k = 8s .. 8s+7 of the slice):
//   X (rows r0 .. r0+15):  matrices {rows 0-7, k 8s..+3}, {rows 8-15, k 8s..+3},
//                          {rows 0-7, k 8s+4..+7}, {rows 8-15, k 8s+4..+7}
//                          = {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]}: one m16 A fragment.
//   W (rows n0 .. n0+15):  matrices {rows 0-7, k 8s..+3}, {rows 0-7, k 8s+4..+7}, and the same
//                          for rows 8-15 = the B fragments {W[g][t], W[g][t+4]} of two n8 tiles.
// Each matrix is 8 rows of one 16-byte chunk; the XOR swizzle (chunk ^ row % 8, smem_tile.cuh)
// puts those 8 chunks in 8 different bank groups, so every ldmatrix phase is conflict-free.
//
// Operands are rounded to TF32 here, in registers (Precision::Tf32: half an ulp added, so that
// the tensor core's truncation rounds, ge::ptx::add_half_ulp_tf32), passed as fp32 and
// truncated by the tensor core (Precision::Tf32Truncated), or split into big and small TF32
// parts (Precision::Tf32x3, ge::ptx::split_tf32), three mma per product. The mainloop (mainloop.cuh) double-buffers
// Frags: it loads k-step s+1 while the mma of k-step s issue.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../common/ptx_sm80.cuh"
#include "config.cuh"
#include "smem_tile.cuh"

namespace ge::sm80 {

template <class Cfg>
struct WarpMma {
    static_assert(Cfg::TILE_K == 32, "lane offsets cover the 4 k-steps of one 32-wide slice");
    static_assert(Cfg::FRAGS_N % 2 == 0, "one ldmatrix.x4 loads two n8 W fragments");
    static constexpr int K_STEPS = Cfg::TILE_K / Cfg::INST_K;
    static constexpr bool SPLIT = Cfg::PRECISION == Precision::Tf32x3;

    // (FRAGS_M x m16, FRAGS_N x n8) accumulators of this warp, in mma's D-fragment order.
    float acc[Cfg::FRAGS_M][Cfg::FRAGS_N][4];
    // Tf32x3: the current k-block's sum, which promote() adds into acc on the CUDA cores. The
    // tensor cores' accumulation truncates (docs/EPILOGUE.md): over all of a long K that costs
    // more than 3xTF32 gains, over one k-block little.
    float part[SPLIT ? Cfg::FRAGS_M : 1][SPLIT ? Cfg::FRAGS_N : 1][4];

    // The operands of one k-step (Tf32x3: x and w hold the big parts).
    struct Frags {
        uint32_t x[Cfg::FRAGS_M][4];
        uint32_t w[Cfg::FRAGS_N][2];
        uint32_t x_small[SPLIT ? Cfg::FRAGS_M : 1][4];  // Tf32x3 only
        uint32_t w_small[SPLIT ? Cfg::FRAGS_N : 1][2];
    };

    // Byte offsets, inside a stage, of the row this lane addresses for ldmatrix at k-step s, for
    // the warp's first X fragment and first W fragment pair. Other fragments are 16 rows (a
    // compile-time distance, same swizzle term) further; the k-step changes the XOR term.
    struct LaneOffsets {
        uint32_t x[K_STEPS];
        uint32_t w[K_STEPS];
    };

    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
            for (int j = 0; j < Cfg::FRAGS_N; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
        if constexpr (SPLIT) clear_part();
    }

    __device__ __forceinline__ void clear_part() {
#pragma unroll
        for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
            for (int j = 0; j < Cfg::FRAGS_N; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) part[i][j][e] = 0.0f;
    }

    // Tf32x3: acc += the k-block's sum (fp32, round to nearest), and a new k-block starts.
    __device__ __forceinline__ void promote() {
        if constexpr (SPLIT) {
#pragma unroll
            for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
                for (int j = 0; j < Cfg::FRAGS_N; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] = __fadd_rn(acc[i][j][e], part[i][j][e]);
            clear_part();
        }
    }

    __device__ __forceinline__ static LaneOffsets lane_offsets(int warp_m, int warp_n, int lane) {
        const int matrix = lane >> 3, row = lane & 7;
        const int x_row = warp_m * Cfg::WARP_M + row + 8 * (matrix & 1), x_half = matrix >> 1;
        const int w_row = warp_n * Cfg::WARP_N + row + 8 * (matrix >> 1), w_half = matrix & 1;
        LaneOffsets o;
#pragma unroll
        for (int s = 0; s < K_STEPS; ++s) {
            o.x[s] = 4 * chunk_offset(x_row, 2 * s + x_half);
            o.w[s] = 4 * (Cfg::TILE_M * Cfg::TILE_K + chunk_offset(w_row, 2 * s + w_half));
        }
        return o;
    }

    // Loads (and rounds) the fragments of k-step `s` of the stage at shared address `stage`.
    __device__ __forceinline__ static void load(Frags &f, uint32_t stage, const LaneOffsets &o, int s) {
        constexpr uint32_t k16Rows = 16 * Cfg::TILE_K * 4;  // bytes
#pragma unroll
        for (int i = 0; i < Cfg::FRAGS_M; ++i) ge::ptx::ldmatrix_x4(f.x[i], stage + o.x[s] + i * k16Rows);
#pragma unroll
        for (int j = 0; j < Cfg::FRAGS_N / 2; ++j) {
            uint32_t r[4];
            ge::ptx::ldmatrix_x4(r, stage + o.w[s] + j * k16Rows);
            f.w[2 * j][0] = r[0], f.w[2 * j][1] = r[1];
            f.w[2 * j + 1][0] = r[2], f.w[2 * j + 1][1] = r[3];
        }
        if constexpr (SPLIT) {
#pragma unroll
            for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) ge::ptx::split_tf32(f.x[i][e], f.x[i][e], f.x_small[i][e]);
#pragma unroll
            for (int j = 0; j < Cfg::FRAGS_N; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) ge::ptx::split_tf32(f.w[j][e], f.w[j][e], f.w_small[j][e]);
        } else if constexpr (Cfg::PRECISION == Precision::Tf32) {
#pragma unroll
            for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) f.x[i][e] = ge::ptx::add_half_ulp_tf32(f.x[i][e]);
#pragma unroll
            for (int j = 0; j < Cfg::FRAGS_N; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) f.w[j][e] = ge::ptx::add_half_ulp_tf32(f.w[j][e]);
        }
    }

    // acc += X · Wᵀ for one k-step, n8 columns [J0, J1) of the warp tile (all by default).
    template <int J0 = 0, int J1 = Cfg::FRAGS_N>
    __device__ __forceinline__ void mma(const Frags &f) {
#pragma unroll
        for (int j = J0; j < J1; ++j)
#pragma unroll
            for (int i = 0; i < Cfg::FRAGS_M; ++i) {
                if constexpr (SPLIT) {  // small terms first, into the k-block's sum
                    ge::ptx::mma_m16n8k8_tf32(part[i][j], f.x_small[i], f.w[j]);
                    ge::ptx::mma_m16n8k8_tf32(part[i][j], f.x[i], f.w_small[j]);
                    ge::ptx::mma_m16n8k8_tf32(part[i][j], f.x[i], f.w[j]);
                } else {
                    ge::ptx::mma_m16n8k8_tf32(acc[i][j], f.x[i], f.w[j]);
                }
            }
    }
};

}  // namespace ge::sm80
