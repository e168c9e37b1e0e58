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

#include "../common/ptx.cuh"
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

// The eight elements a lane holds in one row of a store box: row `row`, columns
// col0 + 8g + j (g < 4, j < 2, col0 = the box's left column + 2 quad), element 2g + j.
inline constexpr int kRowValues = 8;

// Byte offset, in a 128-byte row of a swizzled box, of the pair of columns 8g + 2 quad, +1 that
// a lane holds: 16-byte chunk (2g + quad/2) XOR (row % 8), where row % 8 == lane / 4 for both
// rows of the box it holds.
__device__ __forceinline__ int box_pair_offset(int g, int lane) {
    const int quad = lane % 4;
    return (((2 * g + quad / 2) ^ (lane / 4)) * 16) + (quad % 2) * 8;
}

// C of those elements, by cp.async, into the box row at `box_row` (in shared memory), where
// the lane's outputs of that row will go (box_pair_offset): they land while the lane computes
// and hold no register until it adds them. 0 outside out. The common case, a row of a box
// wholly inside out with 8-byte aligned pairs, is four 8-byte copies; through L1 (.ca), not a
// read-only path, and C may be out: each element is copied by the lane that later writes it.
template <class Epilogue>
__device__ __forceinline__ void stage_source_row(const Epilogue &epi, const GeProblem &prob, int row, int col0,
                                                 bool whole_row, uint8_t *box_row, int lane) {
    const bool in_m = row < prob.m;
    // An element of C (the row's first in out, else the matrix's first): one 64-bit address per
    // row, and the address of every copy outside out, which reads nothing.
    const float *at = epi.source_at(in_m ? row : 0, col0 < prob.n ? col0 : 0);
    if (in_m && whole_row) {
#pragma unroll
        for (int g = 0; g < kRowValues / 2; ++g)
            ge::ptx::cp_async_8(ge::ptx::smem_addr(box_row + box_pair_offset(g, lane)), at + 8 * g);
    } else {
#pragma unroll
        for (int e = 0; e < kRowValues; ++e) {
            const int dc = 8 * (e / 2) + e % 2;  // the element's column - col0
            const bool in = in_m && col0 + dc < prob.n;
            ge::ptx::cp_async_4(ge::ptx::smem_addr(box_row + box_pair_offset(e / 2, lane) + 4 * (e % 2)),
                                at + (in ? dc : 0), in);
        }
    }
}

// The same elements of out, stored straight from registers (no TMA store: out's layout cannot
// have a tensor map).
__device__ __forceinline__ void store_row(const GeProblem &prob, int row, int col0, bool whole_row,
                                          const float (&v)[kRowValues]) {
    if (row >= prob.m) return;
    float *at = prob.out + static_cast<int64_t>(row) * prob.ldo + col0;
    if (whole_row) {
#pragma unroll
        for (int g = 0; g < kRowValues / 2; ++g)
            *reinterpret_cast<float2 *>(at + 8 * g) = make_float2(v[2 * g], v[2 * g + 1]);
    } else {
#pragma unroll
        for (int e = 0; e < kRowValues; ++e)
            if (col0 + 8 * (e / 2) + e % 2 < prob.n) at[8 * (e / 2) + e % 2] = v[e];
    }
}

// Every form that SeedOp and LinearOrReluOp (below) leave out, in registers like store_tile_tma,
// one warp at a time. A step is one (atom, STORE_BOX_COLS slice) box, the two rows of it a lane
// holds: its sixteen v are gathered from the fragment, f applied, C added, and the results
// written into the warp's swizzled box (its lane 0 then TMA-stores the box) or stored straight
// to out. The loop over the boxes is rolled, so that f's code (erff alone is some 25
// instructions) appears once per activation and kernel rather than once per accumulator
// register. C goes through the box buffers: the lane copies its elements of the next box into
// that box's buffer (cp.async, at the places its outputs will take) before it adds this box's,
// so C's latency overlaps a whole step and holds no register (it was also asked into L2 when
// the tile started: prefetch_source_tile). C may be out: each element is copied by the lane
// that writes it, before the box holding it is stored.
template <class Cfg>
__device__ __forceinline__ void store_tile_general(const GeSm90Params &p, float *boxes, int m0, int n0,
                                                   float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM],
                                                   const WarpTileBias<Cfg::TILE_N> &bias, int warp, int lane) {
    constexpr int kBoxFloats = kStoreBoxRows * kStoreBoxCols;
    constexpr int kWarps = Cfg::WARPGROUP_THREADS / 32;
    constexpr int kWarpBufs = static_cast<int>(kEpilogueFloatsPerConsumer) / (kWarps * kBoxFloats);
    constexpr int kGroups = kStoreBoxCols / 8;  // 8-column fragment groups per box
    constexpr int kSlices = Cfg::WGMMA_N / kStoreBoxCols;
    static_assert(kStoreBoxRows == 16 && 2 * kGroups == kRowValues, "a lane's row of a box: 8 values");
    static_assert(kWarpBufs >= 2, "C of the next box is staged while this box is stored");
    constexpr int kBoxes = Cfg::M_ATOMS * kSlices;  // of the warp's part of the tile
    static_assert(kBoxes <= 16, "the gather's switch has 16 cases");
    const GeProblem &prob = p.problem;
    const auto epi = Cfg::Epilogue::from(prob);
    const bool tma = p.store_tma;
    const bool has_c = epi.source != nullptr;
    // Whether whole rows of a box may take the 8-byte paths (and its columns then lie in out).
    const bool pairs_c = (epi.ldc % 2 == 0) && ((reinterpret_cast<uintptr_t>(epi.source) & 7) == 0);
    const bool pairs_out = (prob.ldo % 2 == 0) && ((reinterpret_cast<uintptr_t>(prob.out) & 7) == 0);
    const int quad = lane % 4;
    float *own = boxes + warp * kWarpBufs * kBoxFloats;
    // v = acc + bias in place first, unrolled: the bias registers are dead before the rolled
    // loop, which then holds only the accumulators and one box's values.
#pragma unroll
    for (int ma = 0; ma < Cfg::M_ATOMS; ++ma) {
        static_for<Cfg::WGMMA_N / 8>([&](auto ic) {
            constexpr int i = decltype(ic)::value;
            const float2 bv = bias.template pair<i>(quad);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                acc[ma][i * 4 + h * 2] = epi.linear(acc[ma][i * 4 + h * 2], bv.x);
                acc[ma][i * 4 + h * 2 + 1] = epi.linear(acc[ma][i * 4 + h * 2 + 1], bv.y);
            }
        });
    }
    // Box b's place in out (the lane's rows row0 and row0 + 8, its columns from col0), and its buffer.
    const auto top_of = [&](int b) { return m0 + (b / kSlices) * Cfg::WGMMA_M + warp * kStoreBoxRows; };
    const auto left_of = [&](int b) { return n0 + (b % kSlices) * static_cast<int>(kStoreBoxCols); };
    const auto whole_rows = [&](int b) { return left_of(b) + static_cast<int>(kStoreBoxCols) <= prob.n; };
    const auto buffer_of = [&](int b) { return own + (b % kWarpBufs) * kBoxFloats; };
    // Lane ln's row h of box b's buffer (rows ln / 4 and ln / 4 + 8 of the box). The lane
    // comes from lane_id_here() where these are used, so that its offsets are not held across
    // the mainloops (they cost the 64 x 64 kernel spills there).
    const auto box_row = [&](int b, int h, int ln) {
        return reinterpret_cast<uint8_t *>(buffer_of(b)) + (ln / 4 + 8 * h) * 128;
    };
    // C of box b into its buffer, one cp.async group per box (empty past the last box, so that
    // the waits count the same in every step).
    const auto stage_source = [&](int b, int ln) {
        if (b < kBoxes) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
                stage_source_row(epi, prob, top_of(b) + ln / 4 + 8 * h, left_of(b) + 2 * (ln % 4),
                                 whole_rows(b) && pairs_c, box_row(b, h, ln), ln);
        }
        ge::ptx::cp_async_commit();
    };
    if (has_c) {
        if (tma && lane == 0) ptx::bulk_wait_group_read<0>();  // box 0's and 1's buffers: no store reads them
        __syncwarp();
        stage_source(0, ge::ptx::lane_id_here());
    }
    // One rolled loop over the boxes of every atom: f's code appears once per activation.
#pragma unroll 1
    for (int b = 0; b < kBoxes; ++b) {
        const int ln = ge::ptx::lane_id_here();
        const int top = top_of(b), left = left_of(b);
        const int row0 = top + ln / 4, col0 = left + 2 * (ln % 4);
        // The box's v, both rows in one array (f sees sixteen independent values): the only
        // part that needs the box at compile time (register indices). A switch, which becomes a
        // few compares and sixteen moves; an if chain over the boxes was if-converted into one
        // select per box and value.
        float v[2 * kRowValues];
        const auto gather = [&](auto bc) {
            constexpr int kBox = decltype(bc)::value;
            if constexpr (kBox < kBoxes) {
                constexpr int kAtom = kBox / kSlices, kSlice = kBox % kSlices;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
#pragma unroll
                    for (int g = 0; g < kGroups; ++g) {
                        v[h * kRowValues + 2 * g] = acc[kAtom][(kSlice * kGroups + g) * 4 + h * 2];
                        v[h * kRowValues + 2 * g + 1] = acc[kAtom][(kSlice * kGroups + g) * 4 + h * 2 + 1];
                    }
                }
            }
        };
        switch (b) {
#define GE_GATHER_CASE(K)                         \
    case K:                                       \
        gather(std::integral_constant<int, K>{}); \
        break;
            GE_GATHER_CASE(0)
            GE_GATHER_CASE(1)
            GE_GATHER_CASE(2)
            GE_GATHER_CASE(3)
            GE_GATHER_CASE(4)
            GE_GATHER_CASE(5)
            GE_GATHER_CASE(6)
            GE_GATHER_CASE(7)
            GE_GATHER_CASE(8)
            GE_GATHER_CASE(9)
            GE_GATHER_CASE(10)
            GE_GATHER_CASE(11)
            GE_GATHER_CASE(12)
            GE_GATHER_CASE(13)
            GE_GATHER_CASE(14)
            GE_GATHER_CASE(15)
#undef GE_GATHER_CASE
            default:
                break;
        }
        epi.with_activation([&](auto f) { epilogue::activate_row(f, v); });
        uint8_t *box = reinterpret_cast<uint8_t *>(buffer_of(b));
        if (has_c) {
            // The next box's C, into the other buffer once the store issued from it (box b - 1)
            // has read it; then this box's C, staged one step ago, is waited for and added.
            if (tma && lane == 0) ptx::bulk_wait_group_read<0>();
            __syncwarp();
            stage_source(b + 1, ln);
            ge::ptx::cp_async_wait<1>();
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int g = 0; g < kGroups; ++g) {
                    const float2 c = *reinterpret_cast<const float2 *>(box_row(b, h, ln) + box_pair_offset(g, ln));
                    v[h * kRowValues + 2 * g] = epi.add_c(v[h * kRowValues + 2 * g], c.x);
                    v[h * kRowValues + 2 * g + 1] = epi.add_c(v[h * kRowValues + 2 * g + 1], c.y);
                }
            }
        } else if (tma) {
            if (lane == 0) ptx::bulk_wait_group_read<kWarpBufs - 1>();  // that buffer's last store read it
            __syncwarp();
        }
        if (tma) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int g = 0; g < kGroups; ++g)
                    *reinterpret_cast<float2 *>(box_row(b, h, ln) + box_pair_offset(g, ln)) =
                        make_float2(v[h * kRowValues + 2 * g], v[h * kRowValues + 2 * g + 1]);
            }
            ptx::fence_proxy_async_smem();  // each writer, before the warp's store may read
            __syncwarp();
            if (lane == 0) {
                ptx::tma_store_2d(&p.out_map, box, left, top);
                ptx::bulk_commit_group();
            }
        } else {
            const bool whole_row = whole_rows(b) && pairs_out;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float r[kRowValues];
#pragma unroll
                for (int e = 0; e < kRowValues; ++e) r[e] = v[h * kRowValues + e];
                store_row(prob, row0 + 8 * h, col0, whole_row, r);
            }
        }
    }
    if (has_c) ge::ptx::cp_async_wait<0>();  // the last, empty group: nothing in flight past the loop
}

// The least K above which a tile's C is prefetched (consumer.cuh): behind a shorter mainloop
// the prefetch delays the operands' loads by more than it saves the epilogue.
inline constexpr int kPrefetchSourceMinK = 1024;

// C of a consumer's `rows` x TILE_N part of a tile, asked into L2 when the tile's mainloop
// starts (one prefetch per 128-byte piece of each row, spread over the warpgroup's threads), so
// that store_tile_general's loads of it hit L2 instead of waiting on memory while the tensor
// cores idle (the cooperative kernels run their epilogue between mainloops).
template <class Cfg, class Epilogue>
__device__ __forceinline__ void prefetch_source_tile(const Epilogue &epi, const GeProblem &prob, int m0, int n0,
                                                     int rows, int thread) {
    constexpr int kPieces = Cfg::TILE_N / 32;  // 32 floats = 128 bytes
    for (int t = thread; t < rows * kPieces; t += Cfg::WARPGROUP_THREADS) {
        const int row = m0 + t / kPieces, col = n0 + (t % kPieces) * 32;
        if (row < prob.m && col < prob.n) ge::ptx::prefetch_l2(epi.source_at(row, col));
    }
}

// The pair ops of store_tile_tma for the forms that run unrolled there: the seed's, and plain
// Linear or ReLU (one instantiation for both: a third copy of the unrolled store cost more
// build time than sharing one costs in the kernel). Both are max(v, floor) with NaN kept, floor
// 0 for ReLU and -inf for plain Linear (where it returns v, -0 and NaN included): one
// instruction per element, where a select between them cost three (a NaN test and a predicated
// max and move) and made that store's code longer than the seed form's. Every
// other form takes the rolled loop of store_tile_general: an unrolled copy of f per accumulator
// register would be larger, and an unrolled + C, each pair waiting for its own load of C,
// measured slower than the rolled loop, which stages C a box ahead (docs/EPILOGUE.md, "What it
// costs").
template <class Epilogue>
struct SeedOp {
    Epilogue epi;
    __device__ __forceinline__ float2 operator()(float a0, float a1, float2 b) const {
        return make_float2(epi(a0, b.x), epi(a1, b.y));
    }
};

template <class Epilogue>
struct LinearOrReluOp {
    Epilogue epi;
    float floor;  // 0 (ReLU) or -inf (plain Linear)
    __device__ __forceinline__ LinearOrReluOp(const Epilogue &e, bool relu)
        : epi(e), floor(relu ? 0.0f : __int_as_float(0xff800000)) {}
    __device__ __forceinline__ float one(float acc, float b) const {
        return epilogue::max_keep_nan(epi.linear(acc, b), floor);
    }
    __device__ __forceinline__ float2 operator()(float a0, float a1, float2 b) const {
        return make_float2(one(a0, b.x), one(a1, b.y));
    }
};

// Through shared memory, one warp at a time: each warp holds 16 rows of every 64-row wgmma atom
// (the fragment layout above), and stores them on its own. For each atom and STORE_BOX_COLS-wide
// column slice the warp applies the epilogue to its fragments, writes them into a 128B-swizzled
// (STORE_BOX_ROWS = 16, 32) box of its own staging buffers, and its lane 0 TMA-stores the box to
// out at (row m0 + 64 ma + 16 warp, column n0 + 32 q); TMA clips what lies outside out. No
// barrier spans more than the warp, so a warp never waits for another's math or stores. A box
// buffer is rewritten only after the store this warp issued kWarpBufs boxes earlier (maybe in
// the previous tile) has read it. `op(acc0, acc1, bias pair)` is a pair of elements' output
// (SeedOp, LinearOrReluOp above).
template <class Cfg, class Op>
__device__ __forceinline__ void store_tile_tma(const GeSm90Params &p, float *boxes, int m0, int n0,
                                               const float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM],
                                               const WarpTileBias<Cfg::TILE_N> &bias, int warp, int lane,
                                               const Op &op) {
    constexpr int kBoxFloats = kStoreBoxRows * kStoreBoxCols;
    constexpr int kWarps = Cfg::WARPGROUP_THREADS / 32;
    constexpr int kWarpBufs = static_cast<int>(kEpilogueFloatsPerConsumer) / (kWarps * kBoxFloats);
    constexpr int kGroups = kStoreBoxCols / 8;  // 8-column fragment groups per box
    constexpr int kSlices = Cfg::WGMMA_N / kStoreBoxCols;
    static_assert(kStoreBoxRows == 16, "a box is one warp's 16 rows of a 64-row wgmma atom");
    static_assert(kWarpBufs >= 1, "epilogue staging smaller than one box per warp");
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
                const int in_row = box_pair_offset(g, lane);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = lane / 4 + h * 8;
                    *reinterpret_cast<float2 *>(reinterpret_cast<uint8_t *>(box) + row * 128 + in_row) =
                        op(acc[ma][i * 4 + h * 2 + 0], acc[ma][i * 4 + h * 2 + 1], b);
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
