// Warp-specialized persistent TF32 GEMM + fused epilogue (sm_90a), CUTLASS 3.x style.
//
//   warpgroup 0      producer: one thread issues the TMA loads of every work item of this CTA
//                    into a STAGES-deep ring (full/empty mbarriers). A work item is a whole tile
//                    or, with stream-K (../common/stream_k.cuh), a range of one tile's k-blocks.
//   warpgroups 1, 2  consumers, by Schedule:
//     PingPong     take alternate items of the CTA (0, 2, 4, ... and 1, 3, 5, ...), each a whole
//                  TILE_M x TILE_N tile in registers. An order barrier hands the tensor cores
//                  from one consumer to the other when it has issued its last wgmma, so one
//                  consumer's epilogue (bias, scale, stores; or the partial-tile hand-off)
//                  overlaps the other's mainloop.
//     Cooperative  split every tile along M (TILE_M / 2 rows each). With TILE_N = 256 each
//                  consumer issues m64n256k8, which reads fewer smem bytes per FLOP than two
//                  m64n128k8 sharing a B operand; TF32 wgmma is close to smem-bandwidth bound.
//   epilogue         each consumer applies the functor to its fragments, stages them in
//                    128B-swizzled (rows, 32) boxes of shared memory and TMA-stores each box
//                    (store_tile_tma); outputs whose rows are not whole aligned 16-byte units
//                    are stored from registers instead (store_tile). GeSm90Params::store_tma.
//                    Both in epilogue_store.cuh; the tile's bias is loaded when its mainloop
//                    starts (WarpTileBias).
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "../common/ptx.cuh"
#include "../common/stream_k.cuh"
#include "../include/gemm_epilogue.h"
#include "epilogue_store.cuh"
#include "ptx.cuh"
#include "smem_layout.cuh"
#include "tile_scheduler.cuh"

namespace ge::sm90 {

enum class Schedule { PingPong, Cooperative };

template <int TILE_M_, int TILE_N_, int TILE_K_, int STAGES_, Schedule SCHEDULE_, int CLUSTER_M_ = 1, int GROUP_M_ = 8,
          class EPILOGUE_ = ge::epilogue::BiasScaleResidual>
struct KernelConfig {
    static constexpr int TILE_M = TILE_M_;  // rows of X / out per CTA tile (one TMA box, fewer rows when m is smaller)
    static constexpr int TILE_N = TILE_N_;  // rows of W / columns of out per CTA tile
    static constexpr int TILE_K = TILE_K_;  // K per stage: one 128-byte swizzle row
    static constexpr int STAGES = STAGES_;  // smem ring depth, shared by both consumers
    static constexpr int GROUP_M = GROUP_M_;  // raster group height (tiles) for L2 reuse
    // CTAs per cluster along M. They work on vertically adjacent tiles with the same W tile,
    // each loading a 1/CLUSTER_M slice of it and multicasting it to all (less L2 traffic).
    static constexpr int CLUSTER_M = CLUSTER_M_;
    static constexpr int B_SLICE_ROWS = TILE_N / CLUSTER_M;  // W map box rows

    static constexpr Schedule SCHEDULE = SCHEDULE_;
    static constexpr bool COOPERATIVE = SCHEDULE == Schedule::Cooperative;
    static constexpr int CONSUMERS = 2;                      // consumer warpgroups
    static constexpr int WARPGROUP_THREADS = 128;
    static constexpr int THREADS = WARPGROUP_THREADS * (1 + CONSUMERS);
    // Register split (65536 per SM, one CTA): producer needs few, consumers hold a
    // CONSUMER_ROWS x TILE_N fp32 accumulator (128 per thread). 40*128 + 232*256 = 64512.
    static constexpr uint32_t PRODUCER_REGS = 40;
    static constexpr uint32_t CONSUMER_REGS = 232;

    static constexpr int WGMMA_M = 64;   // wgmma.m64nNk8: one warpgroup, 64 rows
    static constexpr int WGMMA_N = TILE_N;
    static constexpr int WGMMA_K = 8;    // TF32 K per instruction
    static constexpr int CONSUMER_ROWS = COOPERATIVE ? TILE_M / CONSUMERS : TILE_M;  // rows per consumer
    static constexpr int M_ATOMS = CONSUMER_ROWS / WGMMA_M;  // wgmmas stacked along M per k-step
    static constexpr int TILE_STEP = COOPERATIVE ? 1 : CONSUMERS;  // a consumer's stride through CTA tiles
    static constexpr int TILE_PARTS = COOPERATIVE ? CONSUMERS : 1;  // consumers sharing one CTA tile
    // Consumer warps releasing each stage, per CTA of the cluster.
    static constexpr int RELEASERS = TILE_PARTS * WARPGROUP_THREADS / 32;
    static constexpr int K_STEPS = TILE_K / WGMMA_K;  // k-steps per stage
    static constexpr int ACC_PER_ATOM = WGMMA_M * WGMMA_N / WARPGROUP_THREADS;  // fp32 regs

    using Storage = SharedStorage<TILE_M, TILE_N, TILE_K, STAGES>;
    using Scheduler = GroupedTileScheduler<TILE_M * CLUSTER_M, TILE_N, GROUP_M>;  // one cluster tile
    using Epilogue = EPILOGUE_;  // thread-scope functor applied to each accumulator before the store

    static constexpr uint32_t SMEM_BYTES = kSmemBytes<TILE_M, TILE_N, TILE_K, STAGES>;
    // Named barrier ids (0 is __syncthreads): ORDER_BARRIER + c is "consumer c may start its mainloop".
    static constexpr uint32_t ORDER_BARRIER = 1;
    static constexpr uint32_t ORDER_BARRIER_THREADS = 2 * WARPGROUP_THREADS;
    // WARPGROUP_BARRIER + c: the 128 threads of consumer c (stream-K hand-off, epilogue boxes).
    static constexpr uint32_t WARPGROUP_BARRIER = 3;
    // Stream-K (GeStreamK; the schedule's "CTAs" are clusters): one partial slot per cluster of
    // CLUSTER_M * TILE_M * TILE_N floats, one consumer's part (CONSUMER_ROWS x TILE_N, fragment
    // order) at (rank * TILE_M + part * CONSUMER_ROWS) * TILE_N; CLUSTER_M * TILE_PARTS arrival
    // counters per stream-K cluster tile, one per (rank, part).
    static constexpr int STREAM_K_SLOT_FLOATS = CLUSTER_M * TILE_M * TILE_N;

    static_assert(TILE_N == 64 || TILE_N == 128 || TILE_N == 256, "wrapped wgmma shapes: m64n64k8, m64n128k8, m64n256k8");
    static_assert(CONSUMER_ROWS % WGMMA_M == 0, "rows per consumer: multiple of 64 (one warpgroup wgmma)");
    static_assert(M_ATOMS * ACC_PER_ATOM <= 128, "accumulator above 128 registers per thread");
    static_assert(M_ATOMS * ACC_PER_ATOM * WARPGROUP_THREADS == CONSUMER_ROWS * TILE_N, "a consumer's partial is its rows");
    static_assert(TILE_M <= 256 && TILE_N <= 256, "TMA boxDim is at most 256 per dimension");
    static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "cluster of 1 or 2 CTAs along M");
    static_assert((B_SLICE_ROWS * TILE_K * 4) % kSwizzleAtomBytes == 0, "W slices must stay swizzle-atom aligned");
    static_assert(SMEM_BYTES <= 232448, "dynamic smem above the sm_90 per-CTA limit (227 KiB)");
};

// Position in the stage ring: stage index and the parity of its current phase.
struct PipelineState {
    uint32_t stage;
    uint32_t phase;

    template <int STAGES>
    __device__ __forceinline__ static PipelineState at(uint64_t iteration) {
        return {static_cast<uint32_t>(iteration % STAGES), static_cast<uint32_t>((iteration / STAGES) & 1)};
    }
    template <int STAGES>
    __device__ __forceinline__ void advance() {
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
        }
    }
};

// Producer (one thread): every k-block of every tile of this CTA, in the consumers' order.
// With a cluster, each CTA's empty[s] counts the consumers of every CTA (the W slice it
// multicasts lands in all of them), and the full[s] bytes come from every CTA's slice.
template <class Cfg>
__device__ __forceinline__ void produce(const GeSm90Params &p, typename Cfg::Storage &s,
                                        const typename Cfg::Scheduler &sched, const StreamKSchedule &work,
                                        int cta_rank) {
    constexpr uint32_t kSliceElems = Cfg::B_SLICE_ROWS * Cfg::TILE_K;
    // What TMA writes into a stage: the X box (p.x_box_rows <= TILE_M rows) and the whole W tile.
    const uint32_t stage_bytes = static_cast<uint32_t>(p.x_box_rows) * Cfg::TILE_K * sizeof(float) + Cfg::Storage::kBBytes;
    PipelineState pipe{0, 0};
    const int items = work.items();
    for (int j = 0; j < items; ++j) {
        const WorkItem w = work.item(j);
        const auto tile = sched.tile(w.tile);
        const int m0 = tile.m0 + cta_rank * Cfg::TILE_M;
        for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
            ptx::mbarrier_wait(&s.empty[pipe.stage], pipe.phase ^ 1);  // first lap passes at once
            ptx::mbarrier_arrive_expect_tx(&s.full[pipe.stage], stage_bytes);
            // (x_box_rows, TILE_K) of X at (m0, k0); OOB rows/columns -> zeros.
            ptx::tma_load_2d(s.a[pipe.stage], &p.x_map, &s.full[pipe.stage], kb * Cfg::TILE_K, m0);
            if constexpr (Cfg::CLUSTER_M == 1) {
                // (TILE_N, TILE_K) of W at (n0, k0).
                ptx::tma_load_2d(s.b[pipe.stage], &p.w_map, &s.full[pipe.stage], kb * Cfg::TILE_K, tile.n0);
            } else {
                // (B_SLICE_ROWS, TILE_K) slice `cta_rank` of the W tile, to every CTA of the cluster.
                ptx::tma_load_2d_multicast(s.b[pipe.stage] + cta_rank * kSliceElems, &p.w_map, &s.full[pipe.stage],
                                           kb * Cfg::TILE_K, tile.n0 + cta_rank * Cfg::B_SLICE_ROWS,
                                           static_cast<uint16_t>((1u << Cfg::CLUSTER_M) - 1));
            }
            pipe.template advance<Cfg::STAGES>();
        }
    }
    if constexpr (Cfg::CLUSTER_M > 1) {
        // Tail: wait until every stage was released by all consumers of the cluster, so no
        // remote arrive can target this CTA's smem after it exits.
        for (int i = 0; i < Cfg::STAGES; ++i) {
            ptx::mbarrier_wait(&s.empty[pipe.stage], pipe.phase ^ 1);
            pipe.template advance<Cfg::STAGES>();
        }
    }
}

// Consumer side of "stage may be overwritten": one arrival per warp on empty[stage] of every
// CTA of the cluster (each producer multicasts into all of them).
template <class Cfg>
__device__ __forceinline__ void release_stage(typename Cfg::Storage &s, uint32_t stage) {
    if constexpr (Cfg::CLUSTER_M == 1) {
        ptx::mbarrier_arrive(&s.empty[stage]);
    } else {
#pragma unroll
        for (uint32_t r = 0; r < Cfg::CLUSTER_M; ++r) ptx::mbarrier_arrive_cluster(&s.empty[stage], r);
    }
}

// Mainloop of one consumer tile: acc[ma] = X(m0 + row0 + 64 ma .. +64, :) * W(n0 .. +TILE_N, :)^T.
// Returns with the last stage still held (released by the caller after wgmma_wait_group<0>).
template <class Cfg>
__device__ __forceinline__ uint32_t mma_tile(typename Cfg::Storage &s, PipelineState &pipe, int k_tiles,
                                             float (&acc)[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM], int row0, int lane) {
    uint32_t held_stage = 0;
    for (int kb = 0; kb < k_tiles; ++kb) {
        ptx::mbarrier_wait(&s.full[pipe.stage], pipe.phase);
        const uint64_t desc_a = make_desc_k_major_sw128(ptx::smem_u32(s.a[pipe.stage]));  // (TILE_M, TILE_K)
        const uint64_t desc_b = make_desc_k_major_sw128(ptx::smem_u32(s.b[pipe.stage]));  // (TILE_N, TILE_K)
        ptx::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < Cfg::K_STEPS; ++ks) {
#pragma unroll
            for (int ma = 0; ma < Cfg::M_ATOMS; ++ma) {
                // A: rows row0 + 64*ma.. of the tile (128 B per row), k-step ks (32 B along the row).
                const uint64_t a = desc_advance(desc_a, (row0 + ma * Cfg::WGMMA_M) * 128 + ks * Cfg::WGMMA_K * 4);
                const uint64_t b = desc_advance(desc_b, ks * Cfg::WGMMA_K * 4);
                ptx::wgmma_tf32<Cfg::WGMMA_N>(acc[ma], a, b, (kb | ks) != 0);
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

// Consumer warpgroup `consumer` (0 or 1). PingPong: tiles j = consumer, consumer + 2, ... of
// this CTA, whole. Cooperative: every tile j, rows consumer * CONSUMER_ROWS.. of it.
template <class Cfg>
__device__ __forceinline__ void consume(const GeSm90Params &p, typename Cfg::Storage &s,
                                        const typename Cfg::Scheduler &sched, const StreamKSchedule &work,
                                        int cta_rank, int consumer, int warp, int lane) {
    const GeProblem &prob = p.problem;
    const bool vec2 = (prob.ldo % 2 == 0) && ((reinterpret_cast<uintptr_t>(prob.out) & 7) == 0);
    const int row0 = Cfg::COOPERATIVE ? consumer * Cfg::CONSUMER_ROWS : 0;
    const int wg_thread = warp * 32 + lane;
    const int items = work.items();
    for (int j = Cfg::COOPERATIVE ? 0 : consumer; j < items; j += Cfg::TILE_STEP) {
        const WorkItem w = work.item(j);
        const auto tile = sched.tile(w.tile);
        // The ring is shared: an item starts at the ring iteration after all earlier items' k-blocks.
        PipelineState pipe = PipelineState::at<Cfg::STAGES>(w.iteration);

        // Wait for the other consumer to finish issuing its mainloop (none before item 0).
        if (!Cfg::COOPERATIVE && j > 0) ptx::named_barrier_sync(Cfg::ORDER_BARRIER + consumer, Cfg::ORDER_BARRIER_THREADS);

        // Bias loads issued now, used in the epilogue: their latency hides behind the mainloop.
        WarpTileBias<Cfg::TILE_N> bias;
        bias.load(Cfg::Epilogue::from(prob), tile.n0, prob.n, lane);

        float acc[Cfg::M_ATOMS][Cfg::ACC_PER_ATOM];
        const uint32_t held_stage = mma_tile<Cfg>(s, pipe, w.kb_end - w.kb_begin, acc, row0, lane);

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
            // Stream-K: this consumer's rows of this CTA's tile, at the same place in every cluster's slot.
            constexpr int kAcc = Cfg::M_ATOMS * Cfg::ACC_PER_ATOM;
            constexpr size_t kSlot = Cfg::STREAM_K_SLOT_FLOATS;
            const int part = Cfg::COOPERATIVE ? consumer : 0;
            const size_t in_slot = static_cast<size_t>(cta_rank * Cfg::TILE_M + row0) * Cfg::TILE_N;
            int32_t *flag = p.stream_k.flags + (w.sk_tile * Cfg::CLUSTER_M + cta_rank) * Cfg::TILE_PARTS + part;
            const uint32_t wg_barrier = Cfg::WARPGROUP_BARRIER + consumer;
            if (!w.finisher) {
                publish_partial<kAcc, Cfg::WARPGROUP_THREADS>(p.stream_k.partials + work.cta * kSlot + in_slot, &acc[0][0], wg_thread);
                ptx::named_barrier_sync(wg_barrier, Cfg::WARPGROUP_THREADS);  // every thread's stores...
                if (wg_thread == 0) ge::ptx::red_release_add(flag, 1);           // ...then the count
                continue;
            }
            const int expected = work.contributors(w);
            if (wg_thread == 0)
                while (ge::ptx::ld_acquire(flag) < expected) __nanosleep(64);
            ptx::named_barrier_sync(wg_barrier, Cfg::WARPGROUP_THREADS);
            for (int c = w.first_contributor; c < work.cta; ++c)
                if (work.has_range(c))
                    add_partial<kAcc, Cfg::WARPGROUP_THREADS>(p.stream_k.partials + c * kSlot + in_slot, &acc[0][0], wg_thread);
        }
        const int m0 = tile.m0 + cta_rank * Cfg::TILE_M + row0;
        if (p.store_tma)
            store_tile_tma<Cfg>(p, s.c[consumer], m0, tile.n0, acc, bias, warp, lane, Cfg::WARPGROUP_BARRIER + consumer);
        else
            store_tile<Cfg>(prob, m0, tile.n0, acc, bias, warp, lane, vec2);
    }
    // The staging buffers must outlive the bulk stores that read them.
    if (p.store_tma && wg_thread == 0) ptx::bulk_wait_all();
}

// The whole kernel body; the __global__ entry passes its thread/block indices.
template <class Cfg>
__device__ __forceinline__ void warp_specialized_gemm(const GeSm90Params &p, uint8_t *smem_raw, int thread_idx,
                                              int block_idx, int grid_size) {
    // Align the dynamic smem base to a swizzle atom (SMEM_BYTES includes this slack).
    const uint32_t misalign = ptx::smem_u32(smem_raw) & (kSwizzleAtomBytes - 1);
    auto &s = *reinterpret_cast<typename Cfg::Storage *>(smem_raw + ((kSwizzleAtomBytes - misalign) & (kSwizzleAtomBytes - 1)));

    const int warpgroup = thread_idx / Cfg::WARPGROUP_THREADS;
    const int wg_thread = thread_idx % Cfg::WARPGROUP_THREADS;
    const int warp = wg_thread / 32;
    const int lane = wg_thread % 32;

    if (thread_idx == 0) {
        for (int i = 0; i < Cfg::STAGES; ++i) {
            ptx::mbarrier_init(&s.full[i], 1);  // producer's arrive_expect_tx; TMA completes the bytes
            ptx::mbarrier_init(&s.empty[i], Cfg::CLUSTER_M * Cfg::RELEASERS);  // consumer warps
        }
        ptx::fence_barrier_init();
        ptx::prefetch_tensormap(&p.x_map);
        ptx::prefetch_tensormap(&p.w_map);
    }
    // With a cluster, the peer's barriers must be initialised before anyone multicasts to them.
    if constexpr (Cfg::CLUSTER_M == 1) __syncthreads();
    else ptx::cluster_sync();

    // Consecutive blocks form a cluster; clusters walk the cluster tiles persistently.
    const int cta_rank = Cfg::CLUSTER_M == 1 ? 0 : static_cast<int>(ptx::cluster_ctarank());
    const int cluster_idx = block_idx / Cfg::CLUSTER_M;
    const int num_clusters = grid_size / Cfg::CLUSTER_M;
    const typename Cfg::Scheduler sched(p.problem.m, p.problem.n);
    const int k_tiles = (p.problem.k + Cfg::TILE_K - 1) / Cfg::TILE_K;
    const StreamKSchedule work(sched.num_tiles, k_tiles, num_clusters, cluster_idx, p.stream_k.tiles);

    if (warpgroup == 0) {
        ptx::setmaxnreg_dec<Cfg::PRODUCER_REGS>();
        if (wg_thread == 0) produce<Cfg>(p, s, sched, work, cta_rank);
    } else {
        ptx::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
        consume<Cfg>(p, s, sched, work, cta_rank, warpgroup - 1, warp, lane);
    }
}

}  // namespace ge::sm90
