// The stage ring between the producer and the consumers: STAGES (X, W) stages in shared memory,
// each guarded by a full and an empty mbarrier (smem_layout.cuh). Every role walks the ring in
// the same order, so a ring iteration number alone gives the stage and the phase to wait for.
#pragma once

#include <cstdint>

#include "ptx.cuh"

namespace ge::sm90 {

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

}  // namespace ge::sm90
