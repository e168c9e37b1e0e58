// CTA-scope body of the mma.sync kernel: raster -> multistage cp.async mainloop -> fused epilogue,
// for one whole tile or, with stream-K (../common/stream_k.cuh), for the ranges of k-blocks of the
// tiles a CTA shares with others.
#pragma once

#include "../common/epilogue.cuh"
#include "../common/ptx.cuh"
#include "../common/stream_k.cuh"
#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "epilogue_store.cuh"
#include "smem_tile.cuh"
#include "warp_mma.cuh"

namespace ge::sm80 {

// Grouped raster: consecutive CTAs cover kRasterGroupM tile-rows x all tile-columns, column by
// column, so the W tiles they share are read from L2 rather than DRAM.
template <class Cfg>
__device__ __forceinline__ void tile_coords(int block, int m, int n, int &tile_m, int &tile_n) {
    const int tiles_m = (m + Cfg::kTileM - 1) / Cfg::kTileM;
    const int tiles_n = (n + Cfg::kTileN - 1) / Cfg::kTileN;
    const int per_group = Cfg::kRasterGroupM * tiles_n;
    const int first_m = (block / per_group) * Cfg::kRasterGroupM;
    const int group_m = min(tiles_m - first_m, Cfg::kRasterGroupM);
    const int in_group = block % per_group;
    tile_m = first_m + in_group % group_m;
    tile_n = in_group / group_m;
}

// Mainloop: accumulates k-tiles [kb_begin, kb_end) of the tile at (m0, n0) into `mma`. Per k-tile
// kt (CUTLASS's multistage schedule, one barrier per k-tile):
//   k-step 0      issue the cp.async of k-tile kt + STAGES - 1 into the stage freed last k-tile
//   k-step s < 3  load the fragments of k-step s + 1 while the mma of k-step s issue
//   k-step 3      issue its mma (fragments loaded at k-step 2), then wait for k-tile kt + 1 and
//                 barrier (it is then visible, and every warp is done reading k-tile kt - 1's
//                 stage), then load its k-step 0 fragments
// so the tensor cores have a k-step of mma queued while the wait and the barrier resolve.
// Issuing k-step 3's mma after the barrier instead left the pipe idle while all warps of the
// CTA waited there: 1.6 % slower for 128x256 tiles, 1 % for 128x128 (H200, docs/TILING.md).
// Every warp has passed its last barrier when it returns (so it is done reading the stages), and
// no copy into shared memory is in flight.
template <class Cfg>
__device__ __forceinline__ void mainloop(const GeProblem &p, float *smem, int m0, int n0, int kb_begin, int kb_end,
                                         WarpMma<Cfg> &mma, int warp_m, int warp_n, int lane, int tid) {
    using XLoader = SmemTileLoader<Cfg::kTileM, Cfg::kThreads, Cfg::kAccess>;
    using WLoader = SmemTileLoader<Cfg::kTileN, Cfg::kThreads, Cfg::kAccess>;
    using Mma = WarpMma<Cfg>;
    constexpr int kStages = Cfg::kStages;
    constexpr int kKSteps = Mma::kKSteps;

    // Stage s: X tile (TILE_M, 32) at smem + s * kStageFloats, then the W tile (TILE_N, 32).
    auto load_stage = [&](int s, int k_tile) {
        float *x_tile = smem + s * Cfg::kStageFloats;
        const int k0 = (kb_begin + k_tile) * Cfg::kTileK;
        XLoader::load(x_tile, p.x, p.ldx, p.m, p.k, m0, k0, tid);
        WLoader::load(x_tile + Cfg::kTileM * Cfg::kTileK, p.w, p.ldw, p.n, p.k, n0, k0, tid);
    };
    const uint32_t smem_base = ptx::smem_addr(smem);
    auto stage_addr = [&](int s) { return smem_base + s * Cfg::kStageFloats * 4; };

    const int k_tiles = kb_end - kb_begin;  // k == 0: no iterations, v = bias

    // Prologue: fill kStages - 1 stages; one commit group per stage, empty past the last k-tile.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        ptx::cp_async_commit();
    }

    const auto offsets = Mma::lane_offsets(warp_m, warp_n, lane);
    typename Mma::Frags frag[2];
    if (k_tiles > 0) {
        ptx::cp_async_wait<kStages - 2>();  // k-tile 0 landed (this thread's copies)...
        __syncthreads();                    // ...and everyone's
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
                ptx::cp_async_commit();
                write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
            }
            if (s < kKSteps - 1) {
                mma.mma(frag[s & 1]);
            } else {
                constexpr int kHalf = Cfg::kFragsN / 2;
                mma.template mma<0, kHalf>(frag[1]);
                ptx::cp_async_wait<kStages - 2>();  // k-tile kt + 1 landed
                __syncthreads();
                read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
                if (kt + 1 < k_tiles) Mma::load(frag[0], stage_addr(read_stage), offsets, 0);
                mma.template mma<kHalf, Cfg::kFragsN>(frag[1]);
            }
        }
    }
    ptx::cp_async_wait<0>();  // nothing may still target smem (the staged epilogue reuses it)
}

// The fused epilogue of a finished tile.
template <class Cfg>
__device__ __forceinline__ void store(const WarpMma<Cfg> &mma, const GeProblem &p, float *smem, int m0, int n0,
                                      int warp_m, int warp_n, int lane, int tid) {
    if constexpr (Cfg::kStore == EpilogueStore::Staged)
        store_tile_staged<Cfg>(mma, Cfg::Epilogue::from(p), p, smem, m0, n0, warp_m, warp_n, lane, tid);
    else
        store_tile<Cfg>(mma, Cfg::Epilogue::from(p), p, m0, n0, warp_m, warp_n, lane);
}

// One whole tile, `tile` of the raster.
template <class Cfg>
__device__ __forceinline__ void whole_tile(const GeProblem &p, float *smem, int tile, int tid) {
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
    int tile_m, tile_n;
    tile_coords<Cfg>(tile, p.m, p.n, tile_m, tile_n);
    const int m0 = tile_m * Cfg::kTileM, n0 = tile_n * Cfg::kTileN;
    WarpMma<Cfg> mma;
    mma.clear();
    mainloop<Cfg>(p, smem, m0, n0, 0, (p.k + Cfg::kTileK - 1) / Cfg::kTileK, mma, warp_m, warp_n, lane, tid);
    store<Cfg>(mma, p, smem, m0, n0, warp_m, warp_n, lane, tid);
}

// Stream-K CTA `cta` of `grid`: its ranges of k-blocks of the stream-K tiles (the last sk.tiles
// of the raster, after `dp_tiles` whole ones), last piece first (../common/stream_k.cuh).
template <class Cfg>
__device__ __forceinline__ void stream_k_ranges(const GeProblem &p, const GeStreamK &sk, float *smem, int dp_tiles,
                                                int grid, int cta, int tid) {
    constexpr int kAcc = Cfg::kFragsM * Cfg::kFragsN * 4;
    constexpr size_t kSlot = static_cast<size_t>(Cfg::kTileM) * Cfg::kTileN;
    static_assert(kAcc * Cfg::kThreads == kSlot, "one partial slot holds the CTA's accumulators");
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
    const int k_tiles = (p.k + Cfg::kTileK - 1) / Cfg::kTileK;
    const int items = StreamKSchedule(sk.tiles, k_tiles, grid, cta, sk.tiles).items();
    WarpMma<Cfg> mma;
    for (int j = 0; j < items; ++j) {
        int m0, n0, kb_begin, kb_end;
        {
            const WorkItem w = StreamKSchedule(sk.tiles, k_tiles, grid, cta, sk.tiles).item(j);
            int tile_m, tile_n;
            tile_coords<Cfg>(dp_tiles + w.tile, p.m, p.n, tile_m, tile_n);
            m0 = tile_m * Cfg::kTileM, n0 = tile_n * Cfg::kTileN, kb_begin = w.kb_begin, kb_end = w.kb_end;
        }
        if (j > 0) __syncthreads();  // the staged epilogue of the previous item is done with smem
        mma.clear();
        mainloop<Cfg>(p, smem, m0, n0, kb_begin, kb_end, mma, warp_m, warp_n, lane, tid);

        // The schedule again rather than kept through the mainloop: it would cost registers there.
        const StreamKSchedule work(sk.tiles, k_tiles, grid, cta, sk.tiles);
        const WorkItem w = work.item(j);
        if (!w.finisher) {
            publish_partial<kAcc, Cfg::kThreads>(sk.partials + cta * kSlot, &mma.acc[0][0][0], tid);
            __syncthreads();                                                // every thread's stores...
            if (tid == 0) ptx::red_release_add(sk.flags + w.sk_tile, 1);  // ...then the count
            continue;
        }
        const int expected = work.contributors(w);
        if (tid == 0)
            while (ptx::ld_acquire(sk.flags + w.sk_tile) < expected) __nanosleep(64);
        __syncthreads();
        for (int c = w.first_contributor; c < cta; ++c)
            if (work.has_range(c)) add_partial<kAcc, Cfg::kThreads>(sk.partials + c * kSlot, &mma.acc[0][0][0], tid);
        store<Cfg>(mma, p, smem, m0, n0, warp_m, warp_n, lane, tid);
    }
}

// The CTA's work. Without stream-K (sk.tiles == 0): the whole tile `block` of the raster. With it,
// each CTA first takes a ticket (its start order): tickets below dp_tiles = num_tiles - sk.tiles
// compute that whole tile; the others are stream-K CTA ticket - dp_tiles of grid - dp_tiles. A
// finisher waits only for lower tickets, which started before it: no deadlock, whatever the grid
// and the occupancy.
template <class Cfg>
__device__ __forceinline__ void fused_gemm(const GeProblem &p, const GeStreamK &sk, float *smem, int block, int grid,
                                           int tid) {
    int tile = block;
    if (sk.tiles > 0) {
        __shared__ int ticket;
        if (tid == 0) ticket = atomicAdd(sk.flags + sk.tiles, 1);
        __syncthreads();
        tile = ticket;
        const int dp_tiles =
            ((p.m + Cfg::kTileM - 1) / Cfg::kTileM) * ((p.n + Cfg::kTileN - 1) / Cfg::kTileN) - sk.tiles;
        if (tile >= dp_tiles) {
            stream_k_ranges<Cfg>(p, sk, smem, dp_tiles, grid - dp_tiles, tile - dp_tiles, tid);
            return;
        }
    }
    whole_tile<Cfg>(p, smem, tile, tid);
}

}  // namespace ge::sm80
