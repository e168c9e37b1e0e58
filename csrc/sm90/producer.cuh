// Producer warpgroup of the sm_90a kernel: one thread issues the TMA loads of every k-block of
// every work item of this CTA into the stage ring (pipeline.cuh), in the consumers' order.
#pragma once

#include <cstdint>

#include "../common/stream_k_schedule.cuh"
#include "../include/gemm_epilogue.h"
#include "pipeline.cuh"
#include "ptx.cuh"

namespace ge::sm90 {

// With a cluster, each CTA's empty[s] counts the consumers of every CTA (the W slice it
// multicasts lands in all of them), and the full[s] bytes come from every CTA's slice.
template <class Cfg>
__device__ __forceinline__ void produce(const GeSm90Params &p, typename Cfg::Storage &s,
                                        const typename Cfg::Raster &raster, const StreamKSchedule &work, int cta_rank) {
    constexpr uint32_t kSliceFloats = Cfg::W_BOX_ROWS * Cfg::TILE_K;
    // What TMA writes into a stage: the X box (p.x_box_rows <= TILE_M rows) and the whole W tile.
    const uint32_t stage_bytes =
        static_cast<uint32_t>(p.x_box_rows) * Cfg::TILE_K * sizeof(float) + Cfg::W_PARTS * Cfg::Storage::W_BYTES;
    PipelineState pipe{0, 0};
    const int items = work.items();
    for (int j = 0; j < items; ++j) {
        const WorkItem w = work.item(j);
        const auto tile = raster.tile(w.tile);
        const int m0 = tile.m0 + cta_rank * Cfg::TILE_M;
        for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
            ptx::mbarrier_wait(&s.empty[pipe.stage], pipe.phase ^ 1);  // first lap passes at once
            ptx::mbarrier_arrive_expect_tx(&s.full[pipe.stage], stage_bytes);
            // x[stage] (TILE_M, TILE_K): X box (x_box_rows, TILE_K) at (m0, k0); OOB rows/columns -> zeros.
            ptx::tma_load_2d(s.x[pipe.stage], &p.x_map, &s.full[pipe.stage], kb * Cfg::TILE_K, m0);
            // W's parts: the big parts (or W) from w_map, then (Tf32x3) the small parts from w_small_map.
#pragma unroll
            for (int part = 0; part < Cfg::W_PARTS; ++part) {
                const GeTensorMap *w_map = part == 0 ? &p.w_map : &p.w_small_map;
                float *w_tile = s.w[pipe.stage] + part * Cfg::Storage::W_PART_FLOATS;
                if constexpr (Cfg::CLUSTER_M == 1) {
                    // (TILE_N, TILE_K): W at (n0, k0).
                    ptx::tma_load_2d(w_tile, w_map, &s.full[pipe.stage], kb * Cfg::TILE_K, tile.n0);
                } else {
                    // (W_BOX_ROWS, TILE_K) slice `cta_rank` of the tile, to every CTA of the cluster.
                    ptx::tma_load_2d_multicast(w_tile + cta_rank * kSliceFloats, w_map, &s.full[pipe.stage],
                                               kb * Cfg::TILE_K, tile.n0 + cta_rank * Cfg::W_BOX_ROWS,
                                               static_cast<uint16_t>((1u << Cfg::CLUSTER_M) - 1));
                }
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

}  // namespace ge::sm90
