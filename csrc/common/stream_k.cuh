// Stream-K partial-tile hand-off, shared by both kernel families (the schedule that decides who
// computes what is in stream_k_schedule.cuh). A "group" is the THREADS threads that hold one
// partial accumulator: an mma.sync CTA, or an sm90 consumer warpgroup; `barrier` synchronises
// exactly them (__syncthreads, or the warpgroup's named barrier).
//
// A partial is ACC floats per thread, stored as float4 columns (float4 r of thread t at
// r * THREADS + t), so that a warp's stores and the finisher's loads are contiguous 512-byte
// runs. `partials` points at the group's place in CTA 0's slot; CTA c's is slot_stride floats
// further (an sm90 cluster's slot holds several groups' partials at fixed offsets).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ptx.cuh"
#include "stream_k_schedule.cuh"

namespace ge {

// A contributor of a stream-K tile: stores this group's partial in the CTA's slot, then counts
// itself in on `flag` once every thread's stores are done (barrier, then a release add).
template <int THREADS, int ACC, class Barrier>
__device__ __forceinline__ void publish_partial(const StreamKSchedule &work, float *partials, size_t slot_stride,
                                                int32_t *flag, const float *acc, int thread, Barrier &&barrier) {
    static_assert(ACC % 4 == 0, "float4 columns");
    float4 *dst = reinterpret_cast<float4 *>(partials + work.cta * slot_stride);
#pragma unroll
    for (int r = 0; r < ACC / 4; ++r)
        dst[r * THREADS + thread] = make_float4(acc[4 * r], acc[4 * r + 1], acc[4 * r + 2], acc[4 * r + 3]);
    barrier();                                           // every thread's stores...
    if (thread == 0) ge::ptx::red_release_add(flag, 1);  // ...then the count
}

// The finisher of a stream-K tile: waits until `flag` counts every contributor before this CTA,
// then adds their partials to `acc` in CTA order, so the sum does not depend on timing.
template <int THREADS, int ACC, class Barrier>
__device__ __forceinline__ void add_partials(const StreamKSchedule &work, const WorkItem &w, const float *partials,
                                             size_t slot_stride, const int32_t *flag, float *acc, int thread,
                                             Barrier &&barrier) {
    static_assert(ACC % 4 == 0, "float4 columns");
    const int expected = work.contributors(w);
    if (thread == 0)
        while (ge::ptx::ld_acquire(flag) < expected) __nanosleep(64);
    barrier();
    for (int c = w.first_contributor; c < work.cta; ++c) {
#if GE_MUTATION == 2
        // Mutation 2 (tests only, tools/mutation_run.sh): the finisher leaves out its first
        // contributor's partial (it still waits for it, so nothing hangs).
        if (c == w.first_contributor) continue;
#endif
        if (work.has_range(c)) {
            const float4 *src = reinterpret_cast<const float4 *>(partials + c * slot_stride);
#pragma unroll
            for (int r = 0; r < ACC / 4; ++r) {
                const float4 v = __ldcg(src + r * THREADS + thread);  // L2: written by another SM
                acc[4 * r] += v.x, acc[4 * r + 1] += v.y, acc[4 * r + 2] += v.z, acc[4 * r + 3] += v.w;
            }
        }
    }
}

}  // namespace ge
