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

// finish() down one lane's column of a box holding v (box column `lane`, out column `col`, rows
// top..top+15): f applied to each, C added, the result written back into the box (tma) or
// stored. Unrolled eight rows at a time: C's loads all in flight at once, and few registers
// beside the accumulators the caller keeps live.
template <class Epilogue, class F>
__device__ __forceinline__ void finish_box_column(const Epilogue &epi, F f, const GeProblem &prob, uint8_t *box,
                                                  int top, int col, int lane, bool tma) {
    constexpr int kStep = 8;
    const bool col_in = col < prob.n;
#pragma unroll
    for (int r0 = 0; r0 < kStoreBoxRows; r0 += kStep) {
        float c[kStep];
#pragma unroll
        for (int r = 0; r < kStep; ++r) {
            const bool in = epi.source && col_in && top + r0 + r < prob.m;
            c[r] = in ? *epi.source_at(top + r0 + r, col) : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < kStep; ++r) {
            float *at = reinterpret_cast<float *>(box + swizzled_box_offset(r0 + r, lane));
            const float y = epi.add_source(f(*at), c[r]);
            if (tma)
                *at = y;
            else if (col_in && top + r0 + r < prob.m)
                prob.out[static_cast<int64_t>(top + r0 + r) * prob.ldo + col] = y;
        }
    }
}

// Every form but the seed's (ActivationResidual::is_seed()), one warp at a time as in
// store_tile_tma: for each atom and STORE_BOX_COLS-wide slice the warp writes v into one of its
// box buffers, and then each lane runs finish() down its column (finish_box_column; C read
// along out's rows, coalesced). With store_tma the results go back into the box and its lane 0
// TMA-stores it; else each lane stores its column. The loop over boxes is rolled and the
// activation chosen once around it, so its code appears once per activation. C may be out:
// each element of it is read before this warp writes that element, and no other warp or CTA
// writes it.
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
    static_assert(kWarpBufs >= 1, "epilogue staging smaller than one box per warp");
    const GeProblem &prob = p.problem;
    const auto epi = Cfg::Epilogue::from(prob);
    const bool tma = p.store_tma;
    const int quad = lane % 4;
    float *own = boxes + warp * kWarpBufs * kBoxFloats;
    epi.with_activation([&](auto f) {
#pragma unroll 1
        for (int b = 0; b < Cfg::M_ATOMS * kSlices; ++b) {
            const int ma = b / kSlices, q = b % kSlices;
            const int top = m0 + ma * Cfg::WGMMA_M + warp * kStoreBoxRows;  // the box's first row in out
            uint8_t *box = reinterpret_cast<uint8_t *>(own + (b % kWarpBufs) * kBoxFloats);
            if (tma && lane == 0) ptx::bulk_wait_group_read<kWarpBufs - 1>();  // that buffer's last store read it
            __syncwarp();
            // v into the box: only this needs the box's (atom, slice) at compile time.
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
                        *reinterpret_cast<float2 *>(box + swizzled_box_offset(lane / 4 + h * 8, 8 * g + 2 * quad)) =
                            make_float2(epi.linear(a[0], bv.x), epi.linear(a[1], bv.y));
                    }
                });
            });
            __syncwarp();
            finish_box_column(epi, f, prob, box, top, n0 + q * kStoreBoxCols + lane, lane, tma);
            if (tma) ptx::fence_proxy_async_smem();  // each writer, before the warp's store may read
            __syncwarp();
            if (tma && lane == 0) {
                ptx::tma_store_2d(&p.out_map, box, n0 + q * kStoreBoxCols, top);
                ptx::bulk_commit_group();
            }
        }
    });
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
