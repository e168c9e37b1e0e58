// Warp-specialized persistent TF32 GEMM + fused epilogue (sm_90a), CUTLASS 3.x style.
//
//   warpgroup 0      producer (producer.cuh): one thread issues the TMA loads of every work item
//                    of this CTA into a STAGES-deep ring (full/empty mbarriers, pipeline.cuh). A
//                    work item is a whole tile or, with stream-K (../common/stream_k.cuh), a
//                    range of one tile's k-blocks.
//   warpgroups 1, 2  consumers (consumer.cuh), by Schedule:
//     PingPong     take alternate items of the CTA (0, 2, 4, ... and 1, 3, 5, ...), each a whole
//                  TILE_M x TILE_N tile in registers. An order barrier hands the tensor cores
//                  from one consumer to the other when it has issued its last wgmma, so one
//                  consumer's epilogue (bias, scale, stores; or the partial-tile hand-off)
//                  overlaps the other's mainloop.
//     Cooperative  split every tile along M (TILE_M / 2 rows each). With TILE_N = 256 each
//                  consumer issues m64n256k8, which reads fewer smem bytes per FLOP than two
//                  m64n128k8 sharing a W operand; TF32 wgmma is close to smem-bandwidth bound.
//   epilogue         each consumer applies the functor to its fragments, stages them in
//                    128B-swizzled (rows, 32) boxes of shared memory and TMA-stores each box
//                    (store_tile_tma); outputs whose rows are not whole aligned 16-byte units
//                    are stored from registers instead (store_tile). GeSm90Params::store_tma.
//                    Both in epilogue_store.cuh; the tile's bias is loaded when its mainloop
//                    starts (tile_bias.cuh).
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../common/stream_k.cuh"
#include "../common/stream_k_schedule.cuh"
#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "consumer.cuh"
#include "producer.cuh"
#include "ptx.cuh"
#include "smem_layout.cuh"

namespace ge::sm90 {

// The whole kernel body; the __global__ entry passes its thread/block indices.
template <class Cfg>
__device__ __forceinline__ void warp_specialized_gemm(const GeSm90Params &p, uint8_t *smem_raw, int thread_idx,
                                                      int block_idx, int grid_size) {
    // Align the dynamic smem base to a swizzle atom (SMEM_BYTES includes this slack).
    const uint32_t misalign = ge::ptx::smem_addr(smem_raw) & (kSwizzleAtomBytes - 1);
    auto &s = *reinterpret_cast<typename Cfg::Storage *>(smem_raw +
                                                         ((kSwizzleAtomBytes - misalign) & (kSwizzleAtomBytes - 1)));

    const int warpgroup = thread_idx / Cfg::WARPGROUP_THREADS;
    const int wg_thread = thread_idx % Cfg::WARPGROUP_THREADS;
    const int warp = wg_thread / 32;
    const int lane = wg_thread % 32;

    // Stream-K finishers wait for the clusters they share a tile with that come before them in
    // the schedule. "Before" is a ticket taken as the cluster starts, not blockIdx: blocks need
    // not start in index order (another kernel may hold SMs), and a finisher that started ahead
    // of a contributor still waiting for an SM would hold its own SM while waiting for it. A
    // lower ticket has started, and a started cluster publishes its partials before it ever
    // waits: no deadlock, whatever runs beside the kernel. The ticket word is GeStreamK's
    // (take_ticket: it needs no zeroing).
    // The ticket lives in the alignment slack at the end of the dynamic shared memory
    // (SMEM_BYTES holds a swizzle atom of slack; the base is 16-byte aligned, so at least the
    // last 16 bytes lie past the aligned storage): a static __shared__ variable would push the
    // 1024-byte-aligned dynamic region up by a whole atom.
    int32_t &ticket = *reinterpret_cast<int32_t *>(smem_raw + Cfg::SMEM_BYTES - 16);
    const int cta_rank = Cfg::CLUSTER_M == 1 ? 0 : static_cast<int>(ptx::cluster_ctarank());
    const bool stream_k = p.stream_k.tiles > 0;
    if (stream_k && thread_idx == 0 && cta_rank == 0) {
        ticket = take_ticket(p.stream_k.ticket, p.stream_k.launch, grid_size / Cfg::CLUSTER_M);
    }
    if (thread_idx == 0) {
        for (int i = 0; i < Cfg::STAGES; ++i) {
            ptx::mbarrier_init(&s.full[i], 1);  // producer's arrive_expect_tx; TMA completes the bytes
            ptx::mbarrier_init(&s.empty[i], Cfg::CLUSTER_M * Cfg::RELEASERS);  // consumer warps
        }
        ptx::fence_barrier_init();
        ptx::prefetch_tensormap(&p.x_map);
        ptx::prefetch_tensormap(&p.w_map);
    }
    // With a cluster, the peer's barriers must be initialised before anyone multicasts to them
    // (and rank 0's ticket written before the other rank reads it).
    if constexpr (Cfg::CLUSTER_M == 1)
        __syncthreads();
    else
        ptx::cluster_sync();

    // Consecutive blocks form a cluster; clusters walk the cluster tiles persistently, in
    // ticket order with stream-K.
    int cluster_idx = block_idx / Cfg::CLUSTER_M;
    if (stream_k) {
        if constexpr (Cfg::CLUSTER_M == 1) {
            cluster_idx = ticket;
        } else {
            cluster_idx = ptx::ld_shared_cluster_s32(&ticket, 0);
            // Rank 0 stays until every rank has read its ticket.
            ptx::cluster_sync();
        }
    }
    const int num_clusters = grid_size / Cfg::CLUSTER_M;
    // Tickets run 0 .. num_clusters - 1, unless the ticket word already carried this launch's
    // number (GeStreamK: not within 2^40 launches of one process); stop rather than hang.
    if (cluster_idx >= num_clusters) __trap();
    const typename Cfg::Raster raster(p.problem.m, p.problem.n);
    const int k_tiles = (p.problem.k + Cfg::TILE_K - 1) / Cfg::TILE_K;
    const StreamKSchedule work(raster.num_tiles, k_tiles, num_clusters, cluster_idx, p.stream_k.tiles);

    if (warpgroup == 0) {
        ptx::setmaxnreg_dec<Cfg::PRODUCER_REGS>();
        if (wg_thread == 0) produce<Cfg>(p, s, raster, work, cta_rank);
    } else {
        ptx::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
        consume<Cfg>(p, s, raster, work, cta_rank, warpgroup - 1, warp, lane);
    }
}

}  // namespace ge::sm90
