// The end of a skinny CTA: its warps' accumulators summed in shared memory, the cluster's CTAs'
// sums added by rank 0 through distributed shared memory, the epilogue applied and out stored.
// Every sum runs in a fixed order (warps 0.., then ranks 0..), so a plan's result is bitwise
// repeatable.
#pragma once

#include "../include/gemm_epilogue.h"
#include "../sm90/ptx.cuh"
#include "config.cuh"
#include "warp_dot.cuh"

namespace ge::skinny {

// Shared memory of one CTA: each warp's TILE_M x TILE_N accumulators, then their sum, both
// indexed [row of out][column offset] (m * TILE_N + n), so that the store walks rows of out.
template <class Cfg>
struct ReduceSmem {
    float warp_sums[Cfg::WARPS][Cfg::TILE_ELEMS];
    float cta_sum[Cfg::TILE_ELEMS];
};

template <class Cfg>
__device__ __forceinline__ void reduce_and_store(const WarpDot<Cfg> &dot, ReduceSmem<Cfg> &smem, const GeProblem &p,
                                                 int n0, uint32_t rank, uint32_t ranks, int tid) {
    const int warp = tid / 32, lane = tid % 32;
#pragma unroll
    for (int f = 0; f < Cfg::X_FRAGS; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            smem.warp_sums[warp][WarpDot<Cfg>::row_of(f, e, lane) * Cfg::TILE_N + WarpDot<Cfg>::col_of(e, lane)] =
                dot.acc[f][e];
    __syncthreads();
#pragma unroll
    for (int i = tid; i < Cfg::TILE_ELEMS; i += Cfg::THREADS) {
        float s = smem.warp_sums[0][i];
#pragma unroll
        for (int w = 1; w < Cfg::WARPS; ++w) s = __fadd_rn(s, smem.warp_sums[w][i]);
        smem.cta_sum[i] = s;
    }
    // Every rank's cta_sum written and visible cluster-wide (release/acquire).
    sm90::ptx::cluster_sync();
    if (rank == 0) {
        const auto epilogue = Cfg::Epilogue::from(p);
#pragma unroll
        for (int i = tid; i < Cfg::TILE_ELEMS; i += Cfg::THREADS) {
            const int m = i / Cfg::TILE_N, n = n0 + i % Cfg::TILE_N;
            if (m >= p.m || n >= p.n) continue;
            float s = smem.cta_sum[i];
#if GE_MUTATION == 7
            // Mutation 7 (tests only, tools/mutation_run.sh): the last rank's sum is left out.
            ranks -= ranks > 1 && i == tid;
#endif
            for (uint32_t r = 1; r < ranks; ++r)
                s = __fadd_rn(s, __int_as_float(sm90::ptx::ld_shared_cluster_s32(&smem.cta_sum[i], r)));
            p.out[int64_t(m) * p.ldo + n] = epilogue.finish_at(epilogue.linear(s, epilogue.bias_at(n)), m, n);
        }
    }
    // No CTA may exit (and free its shared memory) while rank 0 still reads it.
    sm90::ptx::cluster_sync();
}

}  // namespace ge::skinny
