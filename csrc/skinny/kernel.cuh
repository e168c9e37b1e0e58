// CTA-scope body of the skinny kernel: W rows n0 .. n0+15 against every row of X, over this
// CTA's range of k-steps. The cluster's S CTAs split K into S contiguous ranges of whole steps;
// inside a CTA the warps take interleaved steps (warp w: first + w, first + w + WARPS, ...), so
// the CTA reads WARPS x TILE_K contiguous floats of each row of W at a time.
//
// Each warp runs its own ring of STAGES steps in shared memory, filled with cp.async: W is read
// once, so the only thing to hide is memory latency, and a ring keeps STAGES - 1 steps in flight
// without holding them in registers (loads into registers get sunk next to their mma by ptxas,
// leaving one 16-byte load per lane in flight). A lane reads back only its own slots
// (warp_dot.cuh), so its own cp.async.wait_group is all the synchronisation the ring needs.
#pragma once

#include "../common/ptx_sm80.cuh"
#include "../include/gemm_epilogue.h"
#include "cluster_reduce.cuh"
#include "config.cuh"
#include "warp_dot.cuh"

namespace ge::skinny {

template <class Cfg>
__device__ __forceinline__ void skinny_gemm(const GeProblem &p, ReduceSmem<Cfg> &reduce, uint8_t *stages,
                                            uint32_t block, uint32_t rank, uint32_t ranks, int tid) {
    using Dot = WarpDot<Cfg>;
    const int warp = tid / 32, lane = tid % 32;
    const int n0 = int(block / ranks) * Cfg::TILE_N;
    const int64_t steps = (int64_t(p.k) + Cfg::TILE_K - 1) / Cfg::TILE_K;
    const int first = int(steps * rank / ranks), last = int(steps * (rank + 1) / ranks);
    // This warp's steps: first + warp + i * WARPS for i < count.
    const int count = last - first > warp ? (last - first - warp + Cfg::WARPS - 1) / Cfg::WARPS : 0;
    auto k_of = [&](int i) { return (first + warp + i * Cfg::WARPS) * Cfg::TILE_K; };
    // Byte offset of this warp's slots for its step i.
    auto slots = [&](int i) { return (i % Cfg::STAGES) * Cfg::STAGE_BYTES + warp * Cfg::WARP_STAGE_BYTES; };
    const uint32_t base = ge::ptx::smem_addr(stages);

    Dot dot;
    dot.clear();
    // Prologue: STAGES - 1 steps in flight; one commit group per step, empty past the last.
#pragma unroll
    for (int i = 0; i < Cfg::STAGES - 1; ++i) {
        if (i < count) Dot::copy(base + slots(i), p, n0, k_of(i), lane);
        ge::ptx::cp_async_commit();
    }
    for (int i = 0; i < count; ++i) {
        ge::ptx::cp_async_wait<Cfg::STAGES - 2>();  // step i landed (this lane's copies)
        typename Dot::Frags fr;
        Dot::read(fr, reinterpret_cast<const uint4 *>(stages + slots(i)), lane);
        // Into the slots read one step ago (by this lane, into registers the mma have used).
        const int ahead = i + Cfg::STAGES - 1;
        if (ahead < count) Dot::copy(base + slots(ahead), p, n0, k_of(ahead), lane);
        ge::ptx::cp_async_commit();
        dot.mma(fr);
    }
    ge::ptx::cp_async_wait<0>();
    reduce_and_store<Cfg>(dot, reduce, p, n0, rank, ranks, tid);
}

}  // namespace ge::skinny
