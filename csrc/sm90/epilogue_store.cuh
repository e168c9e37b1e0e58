// Epilogue of one consumer tile of the sm_90a kernels: the functor (../common/epilogue.cuh) on
// every accumulator of the wgmma fragment, then the store, through shared memory and TMA
// (store_tile_tma) or straight from registers (store_tile). The tile's bias comes preloaded
// (tile_bias.cuh).
//
// Fragment of m64nNk8 (per warp w, lane l): element [i*4 + h*2 + j] is row 16w + l/4 + 8h,
// column 8i + 2(l%4) + j of the 64 x N atom.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common/ptx_sm80.cuh"
#include "../include/gemm_epilogue.h"
#include "ptx.cuh"
#include "smem_layout.cuh"
#include "tile_bias.cuh"

namespace ge::sm90 {

// Compile-time loop: f(std::integral_constant<int, 0>{}), ..., f(<N - 1>), so that fragment
// group indices stay constants (register indices of the accumulator and of WarpTileBias).
template <int N, class F, int I = 0>
__device__ __forceinline__ void static_for(F &&f) {
    if constexpr (I < N) {
        f(std::integral_constant<int, I>{});
        static_for<N, F, I + 1>(static_cast<F &&>(f));
    }
}

// Straight from the accumulator fragment to global: 8-byte stores where ldo and out allow
// (vec2), else 4-byte ones; rows and columns past (m, n) are skipped.
template <class Cfg>
__device__ __forceinline__ void store_tile(const GeProblem &prob, int m0, int n0,
                                           const float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM],
                                           const WarpTileBias<Cfg::TILE_N> &bias, int warp, int lane, bool vec2) {
    const auto epi = Cfg::Epilogue::from(prob);
    const int quad = lane % 4;
    const int row_base = m0 + warp * 16 + lane / 4;
    static_for<Cfg::WGMMA_N / 8>([&](auto ic) {
        constexpr int i = decltype(ic)::value;
        const float2 b = bias.template pair<i>(quad);  // all lanes, before any of them skips
        const int col = n0 + i * 8 + quad * 2;
        if (col >= prob.n) return;
        const bool has1 = col + 1 < prob.n;
#pragma unroll
        for (int ma = 0; ma < Cfg::M_ATOMS; ++ma) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row_base + ma * Cfg::WGMMA_M + h * 8;
                if (row >= prob.m) continue;
                const float v0 = epi(acc[ma][i * 4 + h * 2 + 0], b.x);
                const float v1 = epi(acc[ma][i * 4 + h * 2 + 1], b.y);
                float *dst = prob.out + static_cast<int64_t>(row) * prob.ldo + col;
                if (vec2 && has1) {
                    *reinterpret_cast<float2 *>(dst) = make_float2(v0, v1);
                } else {
                    dst[0] = v0;
                    if (has1) dst[1] = v1;
                }
            }
        }
    });
}

// Byte offset of box element (row, col) in a 128B-swizzled box (the TMA store's layout): its
// 16-byte chunk col / 4 XOR row % 8, in the box's 128-byte row `row`.
__device__ __forceinline__ int swizzled_box_offset(int row, int col) {
    return row * 128 + (((col / 4) ^ (row % 8)) * 16) + (col % 4) * 4;
}

// Every form but the seed's (ActivationResidual::is_seed()), one warp at a time as in
// store_tile_tma: for each atom and STORE_BOX_COLS-wide slice the warp writes v into its first
// box buffer, its lanes copy C's 16 x 32 values into the second (cp.async, all in flight at
// once), and then each lane runs finish() down its column in a rolled loop (C read along out's
// rows; the loops over boxes and rows rolled, so the activations' code appears once). With
// store_tma the results go back into the box and its lane 0 TMA-stores it; else each lane
// stores its column, coalesced along the rows. C may be out: each element of it is read before
// this warp writes that element, and no other warp or CTA writes it.
template <class Cfg>
__device__ __forceinline__ void store_tile_general(const GeSm90Params &p, float *boxes, int m0, int n0,
                                                   const float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM],
                                                   const WarpTileBias<Cfg::TILE_N> &bias, int warp, int lane) {
    constexpr int kBoxFloats = kStoreBoxRows * kStoreBoxCols;
    constexpr int kWarps = Cfg::WARPGROUP_THREADS / 32;
    constexpr int kWarpBufs = static_cast<int>(kEpilogueFloatsPerConsumer) / (kWarps * kBoxFloats);
    constexpr int kGroups = kStoreBoxCols / 8;
    constexpr int kSlices = Cfg::WGMMA_N / kStoreBoxCols;
    static_assert(kStoreBoxRows == 16 && kStoreBoxCols == 32, "a lane per box column, 16 rows");
    static_assert(kWarpBufs >= 2, "a box for v and one for C per warp");
    const GeProblem &prob = p.problem;
    const auto epi = Cfg::Epilogue::from(prob);
    const bool tma = p.store_tma;
    const int quad = lane % 4;
    float *box = boxes + warp * kWarpBufs * kBoxFloats;
    float *c_box = box + kBoxFloats;  // row-major 16 x 32: lane l's column is bank l
    // One rolled loop over the boxes, so that finish()'s code appears once per kernel; only
    // writing v needs the box's (atom, slice) at compile time, picked by a uniform branch.
#pragma unroll 1
    for (int b = 0; b < Cfg::M_ATOMS * kSlices; ++b) {
        const int ma = b / kSlices, q = b % kSlices;
        const int top = m0 + ma * Cfg::WGMMA_M + warp * kStoreBoxRows;  // the box's first row in out
        const int col = n0 + q * kStoreBoxCols + lane;                  // this lane's column in out
        if (tma && lane == 0) ptx::bulk_wait_group_read<0>();           // the last box's store read it
        __syncwarp();
        if (epi.source) {
            const uint32_t c_addr = static_cast<uint32_t>(__cvta_generic_to_shared(c_box + lane));
#pragma unroll
            for (int r = 0; r < kStoreBoxRows; ++r) {
                const bool in = top + r < prob.m && col < prob.n;
                ge::ptx::cp_async_4(c_addr + r * kStoreBoxCols * 4, epi.source_at(in ? top + r : 0, in ? col : 0), in);
            }
            ge::ptx::cp_async_commit();
        }
        static_for<Cfg::M_ATOMS * kSlices>([&](auto bc) {
            constexpr int kBox = decltype(bc)::value;
            if (b != kBox) return;
            static_for<kGroups>([&](auto gc) {
                constexpr int g = decltype(gc)::value;
                constexpr int i = (kBox % kSlices) * kGroups + g;  // 8-column group of the fragment
                const float2 bv = bias.template pair<i>(quad);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float *a = &acc[kBox / kSlices][i * 4 + h * 2];
                    *reinterpret_cast<float2 *>(reinterpret_cast<uint8_t *>(box) +
                                                swizzled_box_offset(lane / 4 + h * 8, 8 * g + 2 * quad)) =
                        make_float2(epi.linear(a[0], bv.x), epi.linear(a[1], bv.y));
                }
            });
        });
        if (epi.source) ge::ptx::cp_async_wait<0>();
        __syncwarp();
#pragma unroll 1
        for (int r = 0; r < kStoreBoxRows; ++r) {
            float *at = reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(box) + swizzled_box_offset(r, lane));
            const float y = epi.add_source(epi.activate_call(*at), c_box[r * kStoreBoxCols + lane]);
            if (tma)
                *at = y;
            else if (top + r < prob.m && col < prob.n)
                prob.out[static_cast<int64_t>(top + r) * prob.ldo + col] = y;
        }
        if (tma) ptx::fence_proxy_async_smem();  // each writer, before the warp's store may read
        __syncwarp();
        if (tma && lane == 0) {
            ptx::tma_store_2d(&p.out_map, box, n0 + q * kStoreBoxCols, top);
            ptx::bulk_commit_group();
        }
    }
}

// Through shared memory, one warp at a time: each warp holds 16 rows of every 64-row wgmma atom
// (the fragment layout above), and stores them on its own. For each atom and STORE_BOX_COLS-wide
// column slice the warp applies the epilogue to its fragments, writes them into a 128B-swizzled
// (STORE_BOX_ROWS = 16, 32) box of its own staging buffers, and its lane 0 TMA-stores the box to
// out at (row m0 + 64 ma + 16 warp, column n0 + 32 q); TMA clips what lies outside out. No
// barrier spans more than the warp, so a warp never waits for another's math or stores. A box
// buffer is rewritten only after the store this warp issued kWarpBufs boxes earlier (maybe in
// the previous tile) has read it.
template <class Cfg>
__device__ __forceinline__ void store_tile_tma(const GeSm90Params &p, float *boxes, int m0, int n0,
                                               const float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM],
                                               const WarpTileBias<Cfg::TILE_N> &bias, int warp, int lane) {
    constexpr int kBoxFloats = kStoreBoxRows * kStoreBoxCols;
    constexpr int kWarps = Cfg::WARPGROUP_THREADS / 32;
    constexpr int kWarpBufs = static_cast<int>(kEpilogueFloatsPerConsumer) / (kWarps * kBoxFloats);
    constexpr int kGroups = kStoreBoxCols / 8;  // 8-column fragment groups per box
    constexpr int kSlices = Cfg::WGMMA_N / kStoreBoxCols;
    static_assert(kStoreBoxRows == 16, "a box is one warp's 16 rows of a 64-row wgmma atom");
    static_assert(kWarpBufs >= 1, "epilogue staging smaller than one box per warp");
    const auto epi = Cfg::Epilogue::from(p.problem);
    const int quad = lane % 4;
    float *own = boxes + warp * kWarpBufs * kBoxFloats;
#pragma unroll
    for (int ma = 0; ma < Cfg::M_ATOMS; ++ma) {
        static_for<kSlices>([&](auto qc) {
            constexpr int q = decltype(qc)::value;
            float *box = own + ((ma * kSlices + q) % kWarpBufs) * kBoxFloats;
            if (lane == 0) ptx::bulk_wait_group_read<kWarpBufs - 1>();
            __syncwarp();
            static_for<kGroups>([&](auto gc) {
                constexpr int g = decltype(gc)::value;
                constexpr int i = q * kGroups + g;  // 8-column group of the wgmma fragment
                const float2 b = bias.template pair<i>(quad);
                // Byte offset in a 128-byte box row: 16-byte chunk (2g + quad/2) XOR (row % 8),
                // where row % 8 == lane / 4 for both rows this thread holds.
                const int in_row = (((2 * g + quad / 2) ^ (lane / 4)) * 16) + (quad % 2) * 8;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = lane / 4 + h * 8;
                    const float v0 = epi(acc[ma][i * 4 + h * 2 + 0], b.x);
                    const float v1 = epi(acc[ma][i * 4 + h * 2 + 1], b.y);
                    *reinterpret_cast<float2 *>(reinterpret_cast<uint8_t *>(box) + row * 128 + in_row) =
                        make_float2(v0, v1);
                }
            });
            ptx::fence_proxy_async_smem();  // each writer, before the warp's store may read
            __syncwarp();
            if (lane == 0) {
                ptx::tma_store_2d(&p.out_map, box, n0 + q * kStoreBoxCols,
                                  m0 + ma * Cfg::WGMMA_M + warp * kStoreBoxRows);
                ptx::bulk_commit_group();
            }
        });
    }
}

}  // namespace ge::sm90
