// Warp-scope product of one k-step: acc += W(16 rows) · X(TILE_M rows)ᵀ over TILE_K values of k,
// with W as mma.m16n8k8's A operand and X as its B operand (so the accumulator D holds outᵀ:
// rows are columns n of out, columns are rows m).
//
// No shared tiles: every value is used by exactly one mma, so each lane copies the 16-byte units
// its own fragments need and reads them back itself, and the order of k inside a step is chosen
// to make that possible. Lane (g, t) = (lane/4, lane%4) copies, for copy j, the four floats
// k0 + 16j + 4t .. +3 of W rows g and g+8 and of X rows g (+8 per fragment); a quad of lanes reads
// 64 contiguous bytes of a row. mma's k index t stands for the copy's element 2q and t+4 for
// element 2q+1, for half q = 0, 1 of each copy: A = {W[g][2q], W[g+8][2q], W[g][2q+1], W[g+8][2q+1]}, B = {X[g][2q],
// X[g][2q+1]}. The same permutation of k on both operands leaves the sum unchanged (its order inside one mma is the
// tensor core's anyway).
//
// Operands are converted in registers as the precision asks (../common/precision.cuh): half an
// ulp added for Tf32, nothing for Tf32Truncated, split into big and small TF32 parts for Tf32x3.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../common/ptx_sm80.cuh"
#include "../include/gemm_epilogue.h"
#include "config.cuh"

namespace ge::skinny {

template <class Cfg>
struct WarpDot {
    static constexpr bool SPLIT = Cfg::PRECISION == Precision::Tf32x3;

    // acc[f]: D of X fragment f, {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]} = out rows
    // 8f + 2t, 8f + 2t + 1 at columns n0 + g, n0 + g + 8.
    float acc[Cfg::X_FRAGS][4];
    // Tf32x3: this step's sum, added into acc on the CUDA cores (as the mma.sync family does per
    // k-block: the tensor cores' accumulation truncates).
    float part[SPLIT ? Cfg::X_FRAGS : 1][4];

    // One step's operands, as copied: W rows g and g+8, X rows of each fragment.
    struct Frags {
        uint4 w[Cfg::LOADS][2];
        uint4 x[Cfg::LOADS][Cfg::X_FRAGS];
    };

    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int f = 0; f < Cfg::X_FRAGS; ++f)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[f][e] = 0.0f;
    }

    // Copies the step at k0 (W rows n0 .. n0+15, every row of X) asynchronously into this lane's
    // own 16-byte slots of a stage (slot i at stage + (i * 32 + lane) * 16: a warp's 32 lanes
    // fill 512 contiguous bytes, so reading them back is conflict-free); what lies past n, m or
    // k is zero-filled. Only this lane reads its slots back, so its own cp.async.wait_group
    // orders them: no barrier.
    __device__ __forceinline__ static void copy(uint32_t stage, const GeProblem &p, int n0, int k0, int lane) {
        const int g = lane / 4, t = lane % 4;
#pragma unroll
        for (int j = 0; j < Cfg::LOADS; ++j) {
            const int k = k0 + 16 * j + 4 * t;
            const bool k_in = k < p.k;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int n = n0 + g + 8 * h;
                const bool in = k_in && n < p.n;
                ge::ptx::cp_async_16(stage + ((j * 2 + h) * 32 + lane) * 16, in ? p.w + int64_t(n) * p.ldw + k : p.w,
                                     in);
            }
#pragma unroll
            for (int f = 0; f < Cfg::X_FRAGS; ++f) {
                const int m = 8 * f + g;
                const bool in = k_in && m < p.m;
                ge::ptx::cp_async_16(stage + ((2 * Cfg::LOADS + j * Cfg::X_FRAGS + f) * 32 + lane) * 16,
                                     in ? p.x + int64_t(m) * p.ldx + k : p.x, in);
            }
        }
    }

    // A stage's slots back into registers (after this lane's wait for them).
    __device__ __forceinline__ static void read(Frags &fr, const uint4 *stage, int lane) {
#pragma unroll
        for (int j = 0; j < Cfg::LOADS; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) fr.w[j][h] = stage[(j * 2 + h) * 32 + lane];
#pragma unroll
            for (int f = 0; f < Cfg::X_FRAGS; ++f)
                fr.x[j][f] = stage[(2 * Cfg::LOADS + j * Cfg::X_FRAGS + f) * 32 + lane];
        }
    }

    // acc += the step's products.
    __device__ __forceinline__ void mma(const Frags &fr) {
        if constexpr (SPLIT) {
#pragma unroll
            for (int f = 0; f < Cfg::X_FRAGS; ++f)
#pragma unroll
                for (int e = 0; e < 4; ++e) part[f][e] = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < Cfg::LOADS; ++j) {
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                uint32_t a[4] = {word(fr.w[j][0], 2 * q), word(fr.w[j][1], 2 * q), word(fr.w[j][0], 2 * q + 1),
                                 word(fr.w[j][1], 2 * q + 1)};
                uint32_t a_small[4];
                convert(a, a_small);
#pragma unroll
                for (int f = 0; f < Cfg::X_FRAGS; ++f) {
                    uint32_t b[2] = {word(fr.x[j][f], 2 * q), word(fr.x[j][f], 2 * q + 1)};
                    uint32_t b_small[2];
                    convert(b, b_small);
                    if constexpr (SPLIT) {  // small terms first, as the other families do
                        ge::ptx::mma_m16n8k8_tf32(part[f], a, b_small);
                        ge::ptx::mma_m16n8k8_tf32(part[f], a_small, b);
                        ge::ptx::mma_m16n8k8_tf32(part[f], a, b);
                    } else {
                        ge::ptx::mma_m16n8k8_tf32(acc[f], a, b);
                    }
                }
            }
        }
        if constexpr (SPLIT) {
#pragma unroll
            for (int f = 0; f < Cfg::X_FRAGS; ++f)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[f][e] = __fadd_rn(acc[f][e], part[f][e]);
        }
    }

    // Element e of this lane's accumulators as (row of out, column offset from n0).
    __device__ __forceinline__ static int row_of(int f, int e, int lane) { return 8 * f + 2 * (lane % 4) + (e & 1); }
    __device__ __forceinline__ static int col_of(int e, int lane) { return lane / 4 + 8 * (e >> 1); }

   private:
    __device__ __forceinline__ static uint32_t word(const uint4 &v, int i) {
        return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
    }

    template <int N>
    __device__ __forceinline__ static void convert(uint32_t (&r)[N], uint32_t (&small)[N]) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            if constexpr (Cfg::PRECISION == Precision::Tf32)
                r[i] = ge::ptx::add_half_ulp_tf32(r[i]);
            else if constexpr (SPLIT)
                ge::ptx::split_tf32(r[i], r[i], small[i]);
        }
    }
};

}  // namespace ge::skinny
