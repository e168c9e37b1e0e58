// The end of a GEMV CTA: each warp's lanes summed by shuffles, the warps' sums added in shared
// memory in warp order, the epilogue applied and out stored. Every sum runs in a fixed order, so
// a plan's result is bitwise repeatable.
#pragma once

#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "warp_dot.cuh"

namespace ge::gemv {

// Each warp's TILE_M x TILE_N sums, indexed [row of out][column offset] (m * TILE_N + r), so that
// the store walks rows of out.
template <class Cfg>
struct ReduceSmem {
    float warp_sums[Cfg::WARPS][Cfg::TILE_ELEMS];
};

template <class Cfg>
__device__ __forceinline__ void reduce_and_store(const WarpDot<Cfg> &dot, ReduceSmem<Cfg> &smem, const GeProblem &p,
                                                 int n0, int tid) {
    const int warp = tid / 32, lane = tid % 32;
#pragma unroll
    for (int r = 0; r < Cfg::TILE_N; ++r)
#pragma unroll
        for (int m = 0; m < Cfg::TILE_M; ++m) {
            float s = dot.acc[r][m];
        // A butterfly: every lane ends with the same sum, lane 0 stores it.
#pragma unroll
            for (int offset = 16; offset > 0; offset /= 2) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, offset));
            if (lane == 0) smem.warp_sums[warp][m * Cfg::TILE_N + r] = s;
        }
    __syncthreads();
    if (tid < Cfg::TILE_ELEMS) {
        const int m = tid / Cfg::TILE_N, n = n0 + tid % Cfg::TILE_N;
        if (m < p.m && n < p.n) {
            float s = smem.warp_sums[0][tid];
#pragma unroll
            for (int w = 1; w < Cfg::WARPS; ++w) s = __fadd_rn(s, smem.warp_sums[w][tid]);
            const auto epilogue = Cfg::Epilogue::from(p);
            p.out[int64_t(m) * p.ldo + n] = epilogue.finish_at(epilogue.linear(s, epilogue.bias_at(n)), m, n);
        }
    }
}

}  // namespace ge::gemv
