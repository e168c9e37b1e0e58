// Stream-K partial-tile hand-off, shared by both kernel families (the schedule that decides who
// computes what is in stream_k_schedule.cuh). A "group" is the THREADS threads that hold one
// partial accumulator: an mma.sync CTA, or an sm90 consumer warpgroup; `barrier` synchronises
// exactly them (__syncthreads, or the warpgroup's named barrier).
//
// A partial is ACC floats per thread, stored as float4 columns (float4 r of thread t at
// r * THREADS + t), so that a warp's stores and the finisher's loads are contiguous 512-byte
// runs. `partials` points at the group's place in CTA 0's slot; CTA c's is slot_stride floats
// further (an sm90 cluster's slot holds several groups' partials at fixed offsets). `ready`
// points at the group's ready word of CTA 0; CTA c's is ready_stride words further.
//
// No word needs a value at launch: a word a finisher waits on holds the launch's own number
// once it is true, and the ticket word is claimed with it (GeStreamK), so whatever the
// workspace held before cannot pass for this launch's, and the host zeroes nothing. Each
// launch also leaves every word it used cleared, for a CUDA graph that replays it unchanged.
//
// A thread whose fragments lie wholly in rows past the matrix (`live` false: small M; the
// rows are the same in every CTA of a tile) neither stores nor loads partials: its rows are
// never stored. At M = 1 that leaves 4 threads of a 64-row sm_90 tile moving partials.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../include/gemm_epilogue.h"
#include "ptx.cuh"
#include "stream_k_schedule.cuh"

namespace ge {

// The calling CTA's place in the launch's start order, from the ticket word (GeStreamK), among
// the `count` CTAs that take one. The first CTA finds the word as an earlier launch (or anything
// else) left it and tags it with this launch, taking ticket 0; every other CTA counts on. Exactly
// one CAS can succeed, since a word tagged with this launch never matches an earlier value again;
// the others fail once and add. The last ticket resets the word (no CTA of the launch touches it
// after that), so a CUDA graph that replays this launch with the same number finds no tag of it.
__device__ __forceinline__ int take_ticket(uint64_t *word, uint64_t launch, int count) {
    auto *w = reinterpret_cast<unsigned long long *>(word);
    const uint64_t seen = ge::ptx::ld_relaxed(word);
    int ticket = -1;
    if ((seen >> GE_STREAM_K_TICKET_BITS) != launch) {
        const unsigned long long first = (static_cast<unsigned long long>(launch) << GE_STREAM_K_TICKET_BITS) | 1ull;
        if (atomicCAS(w, static_cast<unsigned long long>(seen), first) == seen) ticket = 0;
    }
    if (ticket < 0) ticket = static_cast<int>(atomicAdd(w, 1ull) & ((1ull << GE_STREAM_K_TICKET_BITS) - 1));
    if (ticket == count - 1) atomicExch(w, 0ull);
    return ticket;
}

// A contributor of a stream-K tile: stores this group's partial in the CTA's slot, then marks
// the slot ready for this launch once every thread's stores are done (barrier, then a release).
template <int THREADS, int ACC, class Barrier>
__device__ __forceinline__ void publish_partial(const StreamKSchedule &work, float *partials, size_t slot_stride,
                                                uint64_t *ready, size_t ready_stride, uint64_t launch, const float *acc,
                                                int thread, bool live, Barrier &&barrier) {
    static_assert(ACC % 4 == 0, "float4 columns");
    if (live) {
        float4 *dst = reinterpret_cast<float4 *>(partials + work.cta * slot_stride);
#pragma unroll
        for (int r = 0; r < ACC / 4; ++r)
            dst[r * THREADS + thread] = make_float4(acc[4 * r], acc[4 * r + 1], acc[4 * r + 2], acc[4 * r + 3]);
    }
    barrier();                                                                      // every thread's stores...
    if (thread == 0) ge::ptx::st_release(ready + work.cta * ready_stride, launch);  // ...then the word
}

// The finisher of a stream-K tile: waits until every contributor before this CTA has marked its
// slot ready (and clears the mark: each slot has one reader per launch, and a CUDA graph
// replays a launch with the same number), then adds their partials to `acc` in CTA order, so
// the sum does not depend on timing. IN_FLIGHT contributors' partials are loaded at once
// (IN_FLIGHT * ACC registers, which only a small accumulator leaves room for), so that their L2
// round trips overlap; the adds keep CTA order.
template <int THREADS, int ACC, int IN_FLIGHT, class Barrier>
__device__ __forceinline__ void add_partials(const StreamKSchedule &work, const WorkItem &w, const float *partials,
                                             size_t slot_stride, uint64_t *ready, size_t ready_stride, uint64_t launch,
                                             float *acc, int thread, bool live, Barrier &&barrier) {
    static_assert(ACC % 4 == 0, "float4 columns");
    constexpr int kInFlight = IN_FLIGHT;
    // One thread per contributor polls its word, so that the finisher pays one L2 round trip
    // for all of them (one after another, split-K's up to a wave of contributors cost one each).
    for (int c = w.first_contributor + thread; c < work.cta; c += THREADS)
        if (work.has_range(c)) {
            while (ge::ptx::ld_acquire(ready + c * ready_stride) != launch) __nanosleep(64);
            ready[c * ready_stride] = 0;
        }
    barrier();  // every contributor's partial is visible to the whole group
    if (!live) return;
    for (int c0 = w.first_contributor; c0 < work.cta; c0 += kInFlight) {
        float4 v[kInFlight][ACC / 4];
        bool have[kInFlight];
#pragma unroll
        for (int i = 0; i < kInFlight; ++i) {
            const int c = c0 + i;
            have[i] = c < work.cta && work.has_range(c);
#if GE_MUTATION == 2
            // Mutation 2 (tests only, tools/mutation_run.sh): the finisher leaves out its first
            // contributor's partial (it still waits for it, so nothing hangs).
            if (c == w.first_contributor) have[i] = false;
#endif
            if (have[i]) {
                const float4 *src = reinterpret_cast<const float4 *>(partials + c * slot_stride);
#pragma unroll
                for (int r = 0; r < ACC / 4; ++r)
                    v[i][r] = __ldcg(src + r * THREADS + thread);  // L2: another SM wrote it
            }
        }
#pragma unroll
        for (int i = 0; i < kInFlight; ++i) {
            if (!have[i]) continue;
#pragma unroll
            for (int r = 0; r < ACC / 4; ++r) {
                acc[4 * r] += v[i][r].x, acc[4 * r + 1] += v[i][r].y;
                acc[4 * r + 2] += v[i][r].z, acc[4 * r + 3] += v[i][r].w;
            }
        }
    }
}

}  // namespace ge
