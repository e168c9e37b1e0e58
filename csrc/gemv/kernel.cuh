// CTA-scope body of the GEMV: W rows n0 .. n0+TILE_N-1 against every row of X, over all of K.
// The CTA's warps take interleaved 128-float chunks of K (warp w: chunks w, w + WARPS, ...), each
// lane 16 bytes of each chunk, so one warp load reads 512 contiguous bytes of a W row: four
// whole 128-byte lines (docs/TILING.md, "GEMV"). W is read once and nothing is reused, so there
// are no shared tiles: a loop trip loads UNROLL chunks of every row into registers before any
// FMA uses them, and the many small CTAs (N/2 or N/4 of them, up to 64 warps per SM) keep enough
// bytes in flight to cover DRAM latency. The lanes' and warps' sums are added in a fixed order,
// so a plan's result is bitwise repeatable.
#pragma once

#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "cta_reduce.cuh"
#include "warp_dot.cuh"

namespace ge::gemv {

// 16 bytes of W, streamed: read-only for the kernel's life and never reused, so not kept in L1.
__device__ __forceinline__ float4 load_streamed(const float *p) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
    return v;
}

template <class Cfg>
__device__ __forceinline__ void gemv(const GeProblem &p, ReduceSmem<Cfg> &smem, uint32_t block, int tid) {
    using Dot = WarpDot<Cfg>;
    const int warp = tid / 32, lane = tid % 32;
    const int n0 = int(block) * Cfg::TILE_N;
    const int chunks = (p.k + Cfg::CHUNK_K - 1) / Cfg::CHUNK_K;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    Dot dot;
    dot.clear();
    for (int c = warp; c < chunks; c += Cfg::WARPS * Cfg::UNROLL) {
        float4 w[Cfg::UNROLL][Cfg::TILE_N], x[Cfg::UNROLL][Cfg::TILE_M];
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; ++u) {
            // Rows are read in whole 16-byte units (K % 4 == 0, or rows repacked with zeros past K:
            // the launch contract), so a lane's four values are all in or all out.
            // A chunk past the last one is clamped before it becomes an offset: unclamped, it
            // could pass INT_MAX for K near it.
            const int chunk = c + u * Cfg::WARPS;
            const int k = min(chunk, chunks - 1) * Cfg::CHUNK_K + 4 * lane;
            const bool k_in = chunk < chunks && k < p.k;
#pragma unroll
            for (int r = 0; r < Cfg::TILE_N; ++r)
                w[u][r] = k_in && n0 + r < p.n ? load_streamed(p.w + int64_t(n0 + r) * p.ldw + k) : zero;
#pragma unroll
            for (int m = 0; m < Cfg::TILE_M; ++m)
                x[u][m] = k_in && m < p.m
                              ? Dot::convert(__ldg(reinterpret_cast<const float4 *>(p.x + int64_t(m) * p.ldx + k)))
                              : zero;
        }
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; ++u) dot.fma(w[u], x[u]);
    }
    reduce_and_store<Cfg>(dot, smem, p, n0, tid);
}

}  // namespace ge::gemv
