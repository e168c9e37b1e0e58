// Consumer warpgroups of the sm_90a kernel: the mainloop over the stage ring (mainloop.cuh), the
// stream-K hand-off (../common/stream_k.cuh) and the fused epilogue (epilogue_store.cuh), per
// work item.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../common/ptx.cuh"
#include "../common/stream_k.cuh"
#include "../include/gemm_epilogue.h"
#include "epilogue_store.cuh"
#include "mainloop.cuh"
#include "pipeline.cuh"
#include "ptx.cuh"
#include "smem_layout.cuh"
#include "tile_bias.cuh"

namespace ge::sm90 {

// Consumer warpgroup `consumer` (0 or 1). PingPong: tiles j = consumer, consumer + 2, ... of
// this CTA, whole. Cooperative: every tile j, rows consumer * CONSUMER_ROWS.. of it.
template <class Cfg>
__device__ __forceinline__ void consume(const GeSm90Params &p, typename Cfg::Storage &s,
                                        const typename Cfg::Raster &raster, const StreamKSchedule &work, int cta_rank,
                                        int consumer, int warp, int lane) {
    const GeProblem &prob = p.problem;
    const bool vec2 = (prob.ldo % 2 == 0) && ((reinterpret_cast<uintptr_t>(prob.out) & 7) == 0);
    const int row0 = Cfg::COOPERATIVE ? consumer * Cfg::CONSUMER_ROWS : 0;
    const int wg_thread = warp * 32 + lane;
    const int items = work.items();
    for (int j = Cfg::COOPERATIVE ? 0 : consumer; j < items; j += Cfg::TILE_STEP) {
        const WorkItem w = work.item(j);
        const auto tile = raster.tile(w.tile);
        // The ring is shared: an item starts at the ring iteration after all earlier items' k-blocks.
        PipelineState pipe = PipelineState::at<Cfg::STAGES>(w.iteration);

        // Wait for the other consumer to finish issuing its mainloop (none before item 0).
        if (!Cfg::COOPERATIVE && j > 0)
            ptx::named_barrier_sync(Cfg::ORDER_BARRIER + consumer, Cfg::ORDER_BARRIER_THREADS);

        // Bias loads issued now, used in the epilogue: their latency hides behind the mainloop.
        const auto epi = Cfg::Epilogue::from(prob);
        WarpTileBias<Cfg::TILE_N> bias;
        bias.load(epi, tile.n0, prob.n, lane);
        // C of this consumer's rows, asked into L2 now for the same reason (store_tile_general),
        // where the mainloop is long enough to hide it: behind a short one (K <= 1024) the
        // prefetch's requests delay the mainloop's operand loads by more than they save the
        // epilogue (docs/EPILOGUE.md, "The epilogue in the kernels").
        const int m0 = tile.m0 + cta_rank * Cfg::TILE_M + row0;
        if (epi.source && prob.k > kPrefetchSourceMinK)
            prefetch_source_tile<Cfg>(epi, prob, m0, tile.n0, Cfg::CONSUMER_ROWS, wg_thread);

        float acc[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM];
        const uint32_t held_stage = mma_tile<Cfg>(s, pipe, w.kb_end - w.kb_begin, acc, row0, warp, lane);

        // Hand the tensor cores to the other consumer, if it has a next item (arrivals must match waits).
        if (!Cfg::COOPERATIVE && j + 1 < items)
            ptx::named_barrier_arrive(Cfg::ORDER_BARRIER + (consumer ^ 1), Cfg::ORDER_BARRIER_THREADS);

        ptx::wgmma_wait_group<0>();
#pragma unroll
        for (int ma = 0; ma < Cfg::M_ATOMS; ++ma)
#pragma unroll
            for (int r = 0; r < Cfg::ACC_PER_ATOM; ++r) ptx::fence_operand(acc[ma][r]);
        if (lane == 0) release_stage<Cfg>(s, held_stage);

        if (w.sk_tile >= 0) {
            // Stream-K: this consumer's rows of this CTA's tile, at the same place in every
            // cluster's slot, and its ready word (rank, part) of every cluster's.
            constexpr int kAcc = Cfg::M_ATOMS * Cfg::ACC_PER_ATOM;
            constexpr size_t kSlot = Cfg::STREAM_K_SLOT_FLOATS;
            constexpr size_t kReady = Cfg::CLUSTER_M * Cfg::TILE_PARTS;
            const int part = Cfg::COOPERATIVE ? consumer : 0;
            const size_t in_slot = static_cast<size_t>(cta_rank * Cfg::TILE_M + row0) * Cfg::TILE_N;
            uint64_t *ready = p.stream_k.ready + cta_rank * Cfg::TILE_PARTS + part;
            // wgmma's accumulator layout: this thread's first row is 16 * warp + lane / 4 (its
            // others lie below it).
            const bool live = m0 + 16 * warp + lane / 4 < prob.m;
            const uint32_t wg_barrier = Cfg::WARPGROUP_BARRIER + consumer;
            auto warpgroup_barrier = [&] { ptx::named_barrier_sync(wg_barrier, Cfg::WARPGROUP_THREADS); };
            if (!w.finisher) {
                publish_partial<Cfg::WARPGROUP_THREADS, kAcc>(work, p.stream_k.partials + in_slot, kSlot, ready, kReady,
                                                              p.stream_k.launch, &acc[0][0], wg_thread, live,
                                                              warpgroup_barrier);
                continue;
            }
            add_partials<Cfg::WARPGROUP_THREADS, kAcc, Cfg::STREAM_K_IN_FLIGHT>(
                work, w, p.stream_k.partials + in_slot, kSlot, ready, kReady, p.stream_k.launch, &acc[0][0], wg_thread,
                live, warpgroup_barrier);
        }
        // The seed's form, plain Linear and ReLU without a source unrolled (SeedOp,
        // LinearOrReluOp); every other form through the rolled loop.
        using Epi = typename Cfg::Epilogue;
        const bool linear_or_relu = p.store_tma && epi.source == nullptr &&
                                    (epi.activation == GE_ACTIVATION_IDENTITY || epi.activation == GE_ACTIVATION_RELU);
        if (epi.is_seed() && p.store_tma)
            store_tile_tma<Cfg>(p, s.c[consumer], m0, tile.n0, acc, bias, warp, lane, SeedOp<Epi>{epi});
        else if (epi.is_seed())
            store_tile<Cfg>(prob, m0, tile.n0, acc, bias, warp, lane, vec2);
        else if (linear_or_relu)
            store_tile_tma<Cfg>(p, s.c[consumer], m0, tile.n0, acc, bias, warp, lane,
                                LinearOrReluOp<Epi>{epi, epi.activation == GE_ACTIVATION_RELU});
        else
            store_tile_general<Cfg>(p, s.c[consumer], m0, tile.n0, acc, bias, warp, lane);
    }
    // The staging buffers must outlive the bulk stores that read them (each warp's lane 0 issued its own).
    if (p.store_tma && lane == 0) ptx::bulk_wait_all();
}

}  // namespace ge::sm90
