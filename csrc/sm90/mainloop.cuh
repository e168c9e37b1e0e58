// Mainloops of one consumer tile: acc[ma] = X(row0 + 64 ma .., :) · W(0 .. TILE_N, :)ᵀ over the
// k-blocks of a work item, read from the stage ring. How X reaches the tensor cores is the
// config's PRECISION:
//   Tf32Truncated  wgmma reads X and W from shared memory through descriptors, as TMA wrote them:
//             the tensor core ignores the low 13 mantissa bits (toward zero);
//   Tf32      each k-step's X fragment goes through registers (ldmatrix from the swizzled
//             stage), half a TF32 ulp added so that the tensor core's truncation rounds to
//             nearest, ties away, then wgmma with A from registers; W is read from shared memory
//             as it is, so the host gives these kernels W already rounded (a prepared weight,
//             or W repacked into the workspace).
//   Tf32x3    each k-step's X fragment goes through registers as for Tf32 and is split into
//             big and small TF32 parts (ptx::split_tf32); three wgmmas with A from registers
//             then accumulate small·W_big, big·W_small and big·W_big, reading W's big and
//             small parts from the stage's two W tiles (the host splits W: a prepared weight,
//             or W split into the workspace); each k-block sums from zero in the tensor cores
//             and is then added into acc on the CUDA cores.
// All return with the last stage still held (released by the caller after wgmma_wait_group<0>).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common/precision.cuh"
#include "../common/ptx.cuh"
#include "pipeline.cuh"
#include "ptx.cuh"
#include "smem_layout.cuh"
#include "wgmma.cuh"
#include "wgmma_register_a.cuh"

namespace ge::sm90 {

// X and W from shared memory: one wgmma group per k-block, the previous one still in flight.
template <class Cfg>
__device__ __forceinline__ uint32_t mma_tile_smem_x(typename Cfg::Storage &s, PipelineState &pipe, int k_tiles,
                                                    float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM], int row0, int lane) {
    uint32_t held_stage = 0;
    for (int kb = 0; kb < k_tiles; ++kb) {
        uint32_t x_stage = ge::ptx::smem_addr(s.x[pipe.stage]);  // (TILE_M, TILE_K)
        uint32_t w_stage = ge::ptx::smem_addr(s.w[pipe.stage]);  // (TILE_N, TILE_K)
        if constexpr (Cfg::UNIFORM_DESCRIPTORS) {                // before the wait, where their latency can hide
            x_stage = ge::ptx::warp_uniform(x_stage);
            w_stage = ge::ptx::warp_uniform(w_stage);
        }
        ptx::mbarrier_wait(&s.full[pipe.stage], pipe.phase);
        const uint64_t desc_x = make_desc_k_major_sw128(x_stage);
        const uint64_t desc_w = make_desc_k_major_sw128(w_stage);
        ptx::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks) {
#pragma unroll
            for (int ma = 0; ma < Cfg::M_ATOMS; ++ma) {
                // X: rows row0 + 64*ma.. of the tile (128 B per row), k-step ks (32 B along the row).
                const uint64_t x = desc_advance(desc_x, (row0 + ma * Cfg::WGMMA_M) * 128 + ks * Cfg::WGMMA_K * 4);
                const uint64_t w = desc_advance(desc_w, ks * Cfg::WGMMA_K * 4);
                ptx::wgmma_tf32<Cfg::WGMMA_N>(acc[ma], x, w, (kb | ks) != 0);
            }
        }
        ptx::wgmma_commit_group();
        // Keep this k-block's group in flight; the previous one is done, so free its stage.
        ptx::wgmma_wait_group<1>();
        if (kb > 0 && lane == 0) release_stage<Cfg>(s, held_stage);
        held_stage = pipe.stage;
        pipe.template advance<Cfg::STAGES>();
    }
    return held_stage;
}

// X through registers, rounded to nearest. One wgmma group per k-step, its fragment in one of
// X_BUFFERS register sets: before a set is reloaded, the group that read it must be done
// (wgmma_wait_group<X_BUFFERS - 1>), while the groups after it keep the tensor cores busy. A
// stage is released once the last group that read its W is done.
template <class Cfg>
__device__ __forceinline__ uint32_t mma_tile_rounded_x(typename Cfg::Storage &s, PipelineState &pipe, int k_tiles,
                                                       float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM], int row0,
                                                       int warp, int lane) {
    constexpr int kBuffers = Cfg::X_BUFFERS;
    static_assert(Cfg::K_STEPS % kBuffers == 0, "a k-block's k-steps cycle through the register sets evenly");
    // ldmatrix.x4 row addresses of this lane (bytes into the X stage): matrix j = lane / 8 holds
    // rows 8 (j % 2).. of the warp's 16 and the k-step's 16-byte chunk 2 ks + j / 2, XOR-swizzled
    // by row % 8 = lane % 8 as TMA's 128B swizzle lays it out.
    const int row = row0 + 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
    uint32_t chunk_offset[Cfg::K_STEPS];
#pragma unroll
    for (int ks = 0; ks < Cfg::K_STEPS; ++ks)
        chunk_offset[ks] = row * 128 + (((2 * ks + (lane >> 4)) ^ (lane & 7)) << 4);

    uint32_t frag[kBuffers][Cfg::M_ATOMS][4];
    uint32_t held_stage = 0;
    for (int kb = 0; kb < k_tiles; ++kb) {
        ptx::mbarrier_wait(&s.full[pipe.stage], pipe.phase);
        const uint32_t x_stage = ge::ptx::smem_addr(s.x[pipe.stage]);                          // (TILE_M, TILE_K)
        const uint64_t desc_w = make_desc_k_major_sw128(ge::ptx::smem_addr(s.w[pipe.stage]));  // (TILE_N, TILE_K)
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks) {
            uint32_t(&x)[Cfg::M_ATOMS][4] = frag[ks % kBuffers];
            ptx::wgmma_wait_group<kBuffers - 1>();  // the group that last read this set is done
            // With ks = kBuffers - 1 that includes every group of the previous k-block.
            if (ks == kBuffers - 1 && kb > 0 && lane == 0) release_stage<Cfg>(s, held_stage);
#pragma unroll
            for (int ma = 0; ma < Cfg::M_ATOMS; ++ma) {
                ge::ptx::ldmatrix_x4(x[ma], x_stage + chunk_offset[ks] + ma * Cfg::WGMMA_M * 128);
#pragma unroll
                for (int r = 0; r < 4; ++r) x[ma][r] = ge::ptx::add_half_ulp_tf32(x[ma][r]);
            }
            ptx::wgmma_fence();  // the fragment registers written above, before the wgmma reads them
            const uint64_t w = desc_advance(desc_w, ks * Cfg::WGMMA_K * 4);
#pragma unroll
            for (int ma = 0; ma < Cfg::M_ATOMS; ++ma)
                ptx::wgmma_tf32_rs<Cfg::WGMMA_N>(acc[ma], x[ma], w, (kb | ks) != 0);
            ptx::wgmma_commit_group();
        }
        held_stage = pipe.stage;
        pipe.template advance<Cfg::STAGES>();
    }
    return held_stage;
}

// X through registers, rounded to nearest, a whole k-block at a time: the k-block's wgmmas are
// one group, issued back to back like mma_tile_smem_x's. Fragments are loaded two k-blocks
// ahead into one of three register sets and rounded just before their wgmmas, so the ldmatrix
// latency hides behind the k-block in flight. For tiles whose k-step is too short a wgmma to
// hide a fragment load behind (one 64-row atom of N <= 128).
template <class Cfg>
__device__ __forceinline__ uint32_t mma_tile_rounded_x_by_kblock(typename Cfg::Storage &s, PipelineState &pipe,
                                                                 int k_tiles,
                                                                 float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM],
                                                                 int row0, int warp, int lane) {
    constexpr int kSets = 3;
    const int row = row0 + 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
    uint32_t chunk_offset[Cfg::K_STEPS];
#pragma unroll
    for (int ks = 0; ks < Cfg::K_STEPS; ++ks)
        chunk_offset[ks] = row * 128 + (((2 * ks + (lane >> 4)) ^ (lane & 7)) << 4);
    uint32_t frag[kSets][Cfg::K_STEPS][Cfg::M_ATOMS][4];  // k-blocks kb, kb + 1, kb + 2
    PipelineState ahead = pipe;                           // the stage of the k-block whose fragments load next
    auto load = [&](uint32_t(&f)[Cfg::K_STEPS][Cfg::M_ATOMS][4]) {
        ptx::mbarrier_wait(&s.full[ahead.stage], ahead.phase);
        const uint32_t x_stage = ge::ptx::smem_addr(s.x[ahead.stage]);
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks)
#pragma unroll
            for (int ma = 0; ma < Cfg::M_ATOMS; ++ma)
                ge::ptx::ldmatrix_x4(f[ks][ma], x_stage + chunk_offset[ks] + ma * Cfg::WGMMA_M * 128);
        ahead.template advance<Cfg::STAGES>();
    };
    uint32_t held_stage = 0;
    // One k-block from register set B (a compile-time index: registers cannot be indexed at run
    // time), then the fragments of k-block kb + 2 into the set k-block kb - 1 used.
    auto step = [&](auto set, int kb) {
        constexpr int B = decltype(set)::value;
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks)
#pragma unroll
            for (int ma = 0; ma < Cfg::M_ATOMS; ++ma)
#pragma unroll
                for (int r = 0; r < 4; ++r) frag[B][ks][ma][r] = ge::ptx::add_half_ulp_tf32(frag[B][ks][ma][r]);
        const uint64_t desc_w = make_desc_k_major_sw128(ge::ptx::smem_addr(s.w[pipe.stage]));  // (TILE_N, TILE_K)
        ptx::wgmma_fence();  // the fragments written since the last wgmma, and the accumulators
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks)
#pragma unroll
            for (int ma = 0; ma < Cfg::M_ATOMS; ++ma)
                ptx::wgmma_tf32_rs<Cfg::WGMMA_N>(acc[ma], frag[B][ks][ma], desc_w + ((ks * Cfg::WGMMA_K * 4) >> 4),
                                                 (kb | ks) != 0);
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();  // k-block kb - 1 is done: its register set and stage are free
        if (kb > 0 && lane == 0) release_stage<Cfg>(s, held_stage);
        held_stage = pipe.stage;
        pipe.template advance<Cfg::STAGES>();
        if (kb + 2 < k_tiles) load(frag[(B + 2) % kSets]);
    };
    load(frag[0]);
    if (k_tiles > 1) load(frag[1]);
    for (int kb = 0; kb < k_tiles; kb += kSets) {
        step(std::integral_constant<int, 0>{}, kb);
        if (kb + 1 < k_tiles) step(std::integral_constant<int, 1>{}, kb + 1);
        if (kb + 2 < k_tiles) step(std::integral_constant<int, 2>{}, kb + 2);
    }
    return held_stage;
}

// X through registers, split into 3xTF32's two parts, and the k-blocks' sums promoted to the
// CUDA cores: each k-block's wgmmas (small·W_big, big·W_small, big·W_big per k-step, small
// terms first) accumulate from zero into `part`, which is then added into `acc` with fp32 adds
// that round to nearest. wgmma's own accumulation does not keep fp32's precision over a long K
// (measured on the H200: 2.9e-5 relative error at K = 4096 when all of K accumulates in the
// tensor cores, against 1.2e-6 for cuBLAS's fp32 GEMM; docs/BENCHMARKS.md), so the tensor cores
// only ever sum one k-block. The add waits for the k-block's wgmmas, which the next k-block's
// fragment loads then overlap only partly; that costs less than a third accumulator set would
// in registers. One 64-row atom per consumer: `acc` and `part` are 2 x 64 registers at N = 128.
template <class Cfg>
__device__ __forceinline__ uint32_t mma_tile_split_x(typename Cfg::Storage &s, PipelineState &pipe, int k_tiles,
                                                     float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM], int row0, int warp,
                                                     int lane) {
    static_assert(Cfg::W_PARTS == 2, "W's big and small parts in every stage");
    static_assert(Cfg::M_ATOMS == 1, "acc and the k-block's part must both fit in registers");
    constexpr int kAcc = Cfg::ACC_PER_ATOM;
    const int row = row0 + 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
    uint32_t chunk_offset[Cfg::K_STEPS];
#pragma unroll
    for (int ks = 0; ks < Cfg::K_STEPS; ++ks)
        chunk_offset[ks] = row * 128 + (((2 * ks + (lane >> 4)) ^ (lane & 7)) << 4);

#pragma unroll
    for (int r = 0; r < kAcc; ++r) acc[0][r] = 0.0f;
    float part[kAcc];  // each k-block's first wgmma overwrites it (scale-d 0)
#pragma unroll
    for (int r = 0; r < kAcc; ++r) part[r] = 0.0f;
    uint32_t held_stage = 0;
    uint32_t big[Cfg::K_STEPS][4];
    uint32_t small[Cfg::K_STEPS][4];
    for (int kb = 0; kb < k_tiles; ++kb) {
        ptx::mbarrier_wait(&s.full[pipe.stage], pipe.phase);
        const uint32_t x_stage = ge::ptx::smem_addr(s.x[pipe.stage]);  // (TILE_M, TILE_K)
        const uint32_t w_stage = ge::ptx::smem_addr(s.w[pipe.stage]);  // 2 x (TILE_N, TILE_K)
        const uint64_t desc_w_big = make_desc_k_major_sw128(w_stage);
        const uint64_t desc_w_small = make_desc_k_major_sw128(w_stage + Cfg::Storage::W_BYTES);
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks) {
            uint32_t raw[4];
            ge::ptx::ldmatrix_x4(raw, x_stage + chunk_offset[ks]);
#pragma unroll
            for (int r = 0; r < 4; ++r) ge::ptx::split_tf32(raw[r], big[ks][r], small[ks][r]);
        }
        ptx::wgmma_fence();  // the fragments written above, and `part` read by the adds below
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks) {
            const uint32_t k_bytes = ks * Cfg::WGMMA_K * 4;
            ptx::wgmma_tf32_rs<Cfg::WGMMA_N>(part, small[ks], desc_advance(desc_w_big, k_bytes), ks != 0);
            ptx::wgmma_tf32_rs<Cfg::WGMMA_N>(part, big[ks], desc_advance(desc_w_small, k_bytes), 1);
            ptx::wgmma_tf32_rs<Cfg::WGMMA_N>(part, big[ks], desc_advance(desc_w_big, k_bytes), 1);
        }
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<0>();
#pragma unroll
        for (int r = 0; r < kAcc; ++r) ptx::fence_operand(part[r]);
        // The stage is read: give it back before the adds, so the producer refills it sooner
        // (the last one stays held for the caller, as in the other mainloops).
        if (lane == 0 && kb + 1 < k_tiles) release_stage<Cfg>(s, pipe.stage);
#pragma unroll
        for (int r = 0; r < kAcc; ++r) acc[0][r] = __fadd_rn(acc[0][r], part[r]);
        held_stage = pipe.stage;
        pipe.template advance<Cfg::STAGES>();
    }
    return held_stage;
}

template <class Cfg>
__device__ __forceinline__ uint32_t mma_tile(typename Cfg::Storage &s, PipelineState &pipe, int k_tiles,
                                             float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM], int row0, int warp,
                                             int lane) {
    if constexpr (Cfg::PRECISION == Precision::Tf32x3)
        return mma_tile_split_x<Cfg>(s, pipe, k_tiles, acc, row0, warp, lane);
    else if constexpr (Cfg::PRECISION == Precision::Tf32 && Cfg::X_BY_KBLOCK)
        return mma_tile_rounded_x_by_kblock<Cfg>(s, pipe, k_tiles, acc, row0, warp, lane);
    else if constexpr (Cfg::PRECISION == Precision::Tf32)
        return mma_tile_rounded_x<Cfg>(s, pipe, k_tiles, acc, row0, warp, lane);
    else
        return mma_tile_smem_x<Cfg>(s, pipe, k_tiles, acc, row0, lane);
}

}  // namespace ge::sm90
