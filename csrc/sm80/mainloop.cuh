// CTA-scope multistage mainloop of the mma.sync kernel: cp.async ring of STAGES (X, W) k-tiles
// in shared memory, ldmatrix fragments, mma.sync into the warps' accumulators.
#pragma once

#include "../common/ptx.cuh"
#include "../common/ptx_sm80.cuh"
#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "smem_tile.cuh"
#include "warp_mma.cuh"

namespace ge::sm80 {

// Accumulates k-tiles [kb_begin, kb_end) of the tile at (m0, n0) into `mma`. Per k-tile kt
// (CUTLASS's multistage schedule, one barrier per k-tile):
//   k-step 0      issue the cp.async of k-tile kt + STAGES - 1 into the stage freed last k-tile
//   k-step s < 3  load the fragments of k-step s + 1 while the mma of k-step s issue
//   k-step 3      issue its mma (fragments loaded at k-step 2), then wait for k-tile kt + 1 and
//                 barrier (it is then visible, and every warp is done reading k-tile kt - 1's
//                 stage), then load its k-step 0 fragments
// so the tensor cores have a k-step of mma queued while the wait and the barrier resolve; with
// k-step 3's mma issued after the barrier they would idle while all warps of the CTA wait there
// (docs/BENCHMARKS.md).
// Every warp has passed its last barrier when it returns (so it is done reading the stages), and
// no copy into shared memory is in flight.
template <class Cfg>
__device__ __forceinline__ void mainloop(const GeProblem &p, float *smem, int m0, int n0, int kb_begin, int kb_end,
                                         WarpMma<Cfg> &mma, int warp_m, int warp_n, int lane, int tid) {
    using XLoader = SmemTileLoader<Cfg::TILE_M, Cfg::THREADS, Cfg::ACCESS>;
    using WLoader = SmemTileLoader<Cfg::TILE_N, Cfg::THREADS, Cfg::ACCESS>;
    using Mma = WarpMma<Cfg>;
    constexpr int kStages = Cfg::STAGES;
    constexpr int kKSteps = Mma::K_STEPS;

    // Stage s: X tile (TILE_M, TILE_K) fp32 at smem + s * STAGE_FLOATS, then W tile (TILE_N, TILE_K).
    auto load_stage = [&](int s, int k_tile) {
        float *x_tile = smem + s * Cfg::STAGE_FLOATS;
        const int k0 = (kb_begin + k_tile) * Cfg::TILE_K;
        XLoader::load(x_tile, p.x, p.ldx, p.m, p.k, m0, k0, tid);
        WLoader::load(x_tile + Cfg::TILE_M * Cfg::TILE_K, p.w, p.ldw, p.n, p.k, n0, k0, tid);
    };
    const uint32_t smem_base = ge::ptx::smem_addr(smem);
    auto stage_addr = [&](int s) { return smem_base + s * Cfg::STAGE_FLOATS * 4; };

    const int k_tiles = kb_end - kb_begin;  // k == 0: no iterations, v = bias

    // Prologue: fill STAGES - 1 stages; one commit group per stage, empty past the last k-tile.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        ge::ptx::cp_async_commit();
    }

    const auto offsets = Mma::lane_offsets(warp_m, warp_n, lane);
    typename Mma::Frags frag[2];
    if (k_tiles > 0) {
        ge::ptx::cp_async_wait<kStages - 2>();  // k-tile 0 landed (this thread's copies)...
        __syncthreads();                        // ...and everyone's
        Mma::load(frag[0], stage_addr(0), offsets, 0);
    }
    int read_stage = 0, write_stage = kStages - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
        for (int s = 0; s < kKSteps; ++s) {
            if (s < kKSteps - 1) Mma::load(frag[(s + 1) & 1], stage_addr(read_stage), offsets, s + 1);
            if (s == 0) {
                const int next = kt + kStages - 1;
                if (next < k_tiles) load_stage(write_stage, next);
                ge::ptx::cp_async_commit();
                write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
            }
            if (s < kKSteps - 1) {
                mma.mma(frag[s & 1]);
            } else {
                constexpr int kHalf = Cfg::FRAGS_N / 2;
                mma.template mma<0, kHalf>(frag[1]);
                ge::ptx::cp_async_wait<kStages - 2>();  // k-tile kt + 1 landed
                __syncthreads();
                read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
                if (kt + 1 < k_tiles) Mma::load(frag[0], stage_addr(read_stage), offsets, 0);
                mma.template mma<kHalf, Cfg::FRAGS_N>(frag[1]);
            }
        }
        mma.promote();  // Tf32x3: the k-block's sum into the accumulator (a no-op otherwise)
    }
    ge::ptx::cp_async_wait<0>();  // nothing may still target smem (the staged epilogue reuses it)
}

}  // namespace ge::sm80
