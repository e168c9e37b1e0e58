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

// The CTA's work. Without stream-K (sk.tiles == 0): the whole tile `block` of the raster. With it,
// each CTA first takes a ticket (its start order): tickets below dp_tiles = num_tiles - sk.tiles
// compute that whole tile; the others are stream-K CTA ticket - dp_tiles of grid - dp_tiles and
// take their ranges of k-blocks of the stream-K tiles (the last sk.tiles of the raster), last
// piece first (../common/stream_k_schedule.cuh). A finisher waits only for lower tickets, which
// started before it: no deadlock, whatever the grid and the occupancy.
//
// A whole tile is the one item of a loop that a stream-K CTA runs over its pieces, so that the
// mainloop and the epilogue (every form's store) are inlined once per kernel, not once per kind
// of CTA: a second copy of both doubled the kernels' code and nvcc's time on them.
template <class Cfg>
__device__ __forceinline__ void fused_gemm(const GeProblem &p, const GeStreamK &sk, float *smem, int block, int grid,
                                           int tid) {
    constexpr int kAcc = Cfg::FRAGS_M * Cfg::FRAGS_N * 4;
    constexpr size_t kSlot = static_cast<size_t>(Cfg::TILE_M) * Cfg::TILE_N;
    static_assert(kAcc * Cfg::THREADS == kSlot, "one partial slot holds the CTA's accumulators");
    int tile = block;
    if (sk.tiles > 0) {
        __shared__ int ticket;
        if (tid == 0) ticket = take_ticket(sk.ticket, sk.launch, grid);
        __syncthreads();
        tile = ticket;
        // Tickets run 0 .. grid - 1, unless the ticket word already carried this launch's number
        // (GeStreamK: not within 2^40 launches of one process); stop rather than hang.
        if (tile >= grid) __trap();
    }
    // Only `tile`, the item's index and the tile's place live through the mainloop: the rest
    // follows from the launch's parameters and is computed again where it is needed (each
    // further value held across the mainloop cost the large tiles spills inside it).
    const auto dp_tiles = [&] { return sk.tiles > 0 ? typename Cfg::Raster(p.m, p.n).num_tiles - sk.tiles : grid; };
    const auto k_tiles = [&] { return (p.k + Cfg::TILE_K - 1) / Cfg::TILE_K; };
    const auto schedule = [&] {
        return StreamKSchedule(sk.tiles, k_tiles(), grid - dp_tiles(), tile - dp_tiles(), sk.tiles);
    };
    auto cta_barrier = [] { __syncthreads(); };
    WarpMma<Cfg> mma;
    for (int j = 0;; ++j) {
        const bool shared = tile >= dp_tiles();
        int m0, n0, kb_begin = 0, kb_end = k_tiles();
        {
            int raster_tile = tile;
            if (shared) {
                const StreamKSchedule work = schedule();
                if (j >= work.items()) return;
                const WorkItem w = work.item(j);
                raster_tile = dp_tiles() + w.tile, kb_begin = w.kb_begin, kb_end = w.kb_end;
            }
            const auto t = typename Cfg::Raster(p.m, p.n).tile(raster_tile);
            m0 = t.m0, n0 = t.n0;
        }
        const int warp = tid / 32, lane = tid % 32;
        const int warp_m = warp / Cfg::WARPS_N, warp_n = warp % Cfg::WARPS_N;
        if (j > 0) __syncthreads();  // the staged epilogue of the previous item is done with smem
        mma.clear();
        mainloop<Cfg>(p, smem, m0, n0, kb_begin, kb_end, mma, warp_m, warp_n, lane, tid);

        if (tile >= dp_tiles()) {
            const StreamKSchedule work = schedule();
            const WorkItem w = work.item(j);
            // mma.sync's accumulator layout: this thread's first row is lane / 4 of its warp's rows.
            const bool live = m0 + warp_m * Cfg::WARP_M + lane / 4 < p.m;
            if (!w.finisher) {
                publish_partial<Cfg::THREADS, kAcc>(work, sk.partials, kSlot, sk.ready, 1, sk.launch, &mma.acc[0][0][0],
                                                    tid, live, cta_barrier);
                continue;
            }
            add_partials<Cfg::THREADS, kAcc, 1>(work, w, sk.partials, kSlot, sk.ready, 1, sk.launch, &mma.acc[0][0][0],
                                                tid, live, cta_barrier);
        }
        store<Cfg>(mma, p, smem, m0, n0, warp_m, warp_n, lane, tid);
        if (tile < dp_tiles()) return;  // a whole tile is the CTA's one item
    }
}

}  // namespace ge::sm80
