// CTA-scope body of the mma.sync kernel: raster -> multistage mainloop -> fused epilogue, for one
// whole tile or, with stream-K (../common/stream_k.cuh), for the ranges of k-blocks of the tiles
// a CTA shares with others.
#pragma once

#include "../common/stream_k.cuh"
#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "epilogue_store.cuh"
#include "mainloop.cuh"
#include "warp_mma.cuh"

namespace ge::sm80 {

// The fused epilogue of a finished tile: the seed form as the configuration stores it, every
// other form through the staged tile (a uniform branch: the epilogue is the launch's).
template <class Cfg>
__device__ __forceinline__ void store(const WarpMma<Cfg> &mma, const GeProblem &p, float *smem, int m0, int n0,
                                      int warp_m, int warp_n, int lane, int tid) {
    const auto epi = Cfg::Epilogue::from(p);
    if (!epi.is_seed())
        store_tile_staged<Cfg, false>(mma, epi, p, smem, m0, n0, warp_m, warp_n, lane, tid);
    else if constexpr (Cfg::STORE == EpilogueStore::Staged)
        store_tile_staged<Cfg, true>(mma, epi, p, smem, m0, n0, warp_m, warp_n, lane, tid);
    else
        store_tile<Cfg>(mma, epi, p, m0, n0, warp_m, warp_n, lane);
}

// One whole tile, `tile_id` of the raster.
template <class Cfg>
__device__ __forceinline__ void whole_tile(const GeProblem &p, float *smem, int tile_id, int tid) {
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / Cfg::WARPS_N, warp_n = warp % Cfg::WARPS_N;
    const auto tile = typename Cfg::Raster(p.m, p.n).tile(tile_id);
    WarpMma<Cfg> mma;
    mma.clear();
    mainloop<Cfg>(p, smem, tile.m0, tile.n0, 0, (p.k + Cfg::TILE_K - 1) / Cfg::TILE_K, mma, warp_m, warp_n, lane, tid);
    store<Cfg>(mma, p, smem, tile.m0, tile.n0, warp_m, warp_n, lane, tid);
}

// Stream-K CTA `cta` of `grid`: its ranges of k-blocks of the stream-K tiles (the last sk.tiles
// of the raster, after `dp_tiles` whole ones), last piece first (../common/stream_k_schedule.cuh).
template <class Cfg>
__device__ __forceinline__ void stream_k_ranges(const GeProblem &p, const GeStreamK &sk, float *smem, int dp_tiles,
                                                int grid, int cta, int tid) {
    constexpr int kAcc = Cfg::FRAGS_M * Cfg::FRAGS_N * 4;
    constexpr size_t kSlot = static_cast<size_t>(Cfg::TILE_M) * Cfg::TILE_N;
    static_assert(kAcc * Cfg::THREADS == kSlot, "one partial slot holds the CTA's accumulators");
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / Cfg::WARPS_N, warp_n = warp % Cfg::WARPS_N;
    const int k_tiles = (p.k + Cfg::TILE_K - 1) / Cfg::TILE_K;
    const int items = StreamKSchedule(sk.tiles, k_tiles, grid, cta, sk.tiles).items();
    auto cta_barrier = [] { __syncthreads(); };
    WarpMma<Cfg> mma;
    for (int j = 0; j < items; ++j) {
        int m0, n0, kb_begin, kb_end;
        {
            const WorkItem w = StreamKSchedule(sk.tiles, k_tiles, grid, cta, sk.tiles).item(j);
            const auto tile = typename Cfg::Raster(p.m, p.n).tile(dp_tiles + w.tile);
            m0 = tile.m0, n0 = tile.n0, kb_begin = w.kb_begin, kb_end = w.kb_end;
        }
        if (j > 0) __syncthreads();  // the staged epilogue of the previous item is done with smem
        mma.clear();
        mainloop<Cfg>(p, smem, m0, n0, kb_begin, kb_end, mma, warp_m, warp_n, lane, tid);

        // The schedule again rather than kept through the mainloop: it would cost registers there.
        const StreamKSchedule work(sk.tiles, k_tiles, grid, cta, sk.tiles);
        const WorkItem w = work.item(j);
        // mma.sync's accumulator layout: this thread's first row is lane / 4 of its warp's rows.
        const bool live = m0 + warp_m * Cfg::WARP_M + lane / 4 < p.m;
        if (!w.finisher) {
            publish_partial<Cfg::THREADS, kAcc>(work, sk.partials, kSlot, sk.ready, 1, sk.launch, &mma.acc[0][0][0],
                                                tid, live, cta_barrier);
            continue;
        }
        add_partials<Cfg::THREADS, kAcc, 1>(work, w, sk.partials, kSlot, sk.ready, 1, sk.launch, &mma.acc[0][0][0], tid,
                                            live, cta_barrier);
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
        if (tid == 0) ticket = take_ticket(sk.ticket, sk.launch, grid);
        __syncthreads();
        tile = ticket;
        // Tickets run 0 .. grid - 1, unless the ticket word already carried this launch's number
        // (GeStreamK: not within 2^40 launches of one process); stop rather than hang.
        if (tile >= grid) __trap();
        const int dp_tiles = typename Cfg::Raster(p.m, p.n).num_tiles - sk.tiles;
        if (tile >= dp_tiles) {
            stream_k_ranges<Cfg>(p, sk, smem, dp_tiles, grid - dp_tiles, tile - dp_tiles, tid);
            return;
        }
    }
    whole_tile<Cfg>(p, smem, tile, tid);
}

}  // namespace ge::sm80
