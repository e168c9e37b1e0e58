// A TMA + wgmma kernel configuration: the shapes, roles and policies, composed into one type.
// Named like the mma.sync family's KernelConfig (../sm80/config.cuh).
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "../common/precision.cuh"
#include "../common/tile_raster.cuh"
#include "smem_layout.cuh"

namespace ge::sm90 {

// How the two consumer warpgroups share the work (warp_specialized.cuh).
enum class Schedule { PingPong, Cooperative };

template <int TILE_M_, int TILE_N_, int TILE_K_, int STAGES_, Schedule SCHEDULE_, int CLUSTER_M_, Precision PRECISION_,
          int GROUP_M_ = 8, class EPILOGUE_ = ge::epilogue::ActivationResidual>
struct KernelConfig {
    static constexpr int TILE_M = TILE_M_;  // rows of X / out per CTA tile (one TMA box, fewer rows when m is smaller)
    static constexpr int TILE_N = TILE_N_;  // rows of W / columns of out per CTA tile
    static constexpr int TILE_K = TILE_K_;  // K per stage: one 128-byte swizzle row
    static constexpr int STAGES = STAGES_;  // smem ring depth, shared by both consumers
    static constexpr int GROUP_M = GROUP_M_;  // raster group height (tiles) for L2 reuse
    // CTAs per cluster along M. They work on vertically adjacent tiles with the same W tile,
    // each loading a 1/CLUSTER_M slice of it and multicasting it to all (less L2 traffic).
    static constexpr int CLUSTER_M = CLUSTER_M_;
    static constexpr int W_BOX_ROWS = TILE_N / CLUSTER_M;  // W map box rows: one CTA's slice

    // How X reaches the tensor cores (mainloop.cuh): from shared memory as TMA wrote it
    // (Tf32Truncated), or through registers, rounded to nearest (Tf32; W must arrive rounded) or
    // split into two TF32 parts (Tf32x3; W's two parts arrive in two tiles of each stage).
    static constexpr Precision PRECISION = PRECISION_;
    static constexpr int W_PARTS = PRECISION == Precision::Tf32x3 ? 2 : 1;  // W tiles per stage

    static constexpr Schedule SCHEDULE = SCHEDULE_;
    static constexpr bool COOPERATIVE = SCHEDULE == Schedule::Cooperative;
    static constexpr int CONSUMERS = 2;  // consumer warpgroups
    static constexpr int WARPGROUP_THREADS = 128;
    static constexpr int THREADS = WARPGROUP_THREADS * (1 + CONSUMERS);
    // Register split (65536 per SM, one CTA): producer needs few, consumers hold a
    // CONSUMER_ROWS x TILE_N fp32 accumulator (128 per thread). 40*128 + 232*256 = 64512.
    static constexpr uint32_t PRODUCER_REGS = 40;
    static constexpr uint32_t CONSUMER_REGS = 232;

    static constexpr int WGMMA_M = 64;  // wgmma.m64nNk8: one warpgroup, 64 rows
    static constexpr int WGMMA_N = TILE_N;
    static constexpr int WGMMA_K = 8;                                                // TF32 K per instruction
    static constexpr int CONSUMER_ROWS = COOPERATIVE ? TILE_M / CONSUMERS : TILE_M;  // rows per consumer
    static constexpr int M_ATOMS = CONSUMER_ROWS / WGMMA_M;         // wgmmas stacked along M per k-step
    static constexpr int TILE_STEP = COOPERATIVE ? 1 : CONSUMERS;   // a consumer's stride through CTA tiles
    static constexpr int TILE_PARTS = COOPERATIVE ? CONSUMERS : 1;  // consumers sharing one CTA tile
    // Consumer warps releasing each stage, per CTA of the cluster.
    static constexpr int RELEASERS = TILE_PARTS * WARPGROUP_THREADS / 32;
    static constexpr int K_STEPS = TILE_K / WGMMA_K;                            // k-steps per stage
    static constexpr int ACC_PER_ATOM = WGMMA_M * WGMMA_N / WARPGROUP_THREADS;  // fp32 regs
    // Precision::Tf32: register sets of X fragments (4 regs per 64-row atom) in flight, one
    // wgmma group each. More sets keep more groups queued for the tensor cores while the next
    // fragment loads; two atoms per consumer already keep a set's group busy twice as long.
    // (Tf32x3 loads a whole k-block's fragments at once: mma_tile_split_x.)
    static constexpr int X_BUFFERS = M_ATOMS > 1 ? 2 : 4;
    // Precision::Tf32 with one 64-row atom of N <= 128: a k-step's wgmma is too short to hide
    // the next fragment's load behind, so whole k-blocks are loaded and issued at once instead
    // (two k-blocks of fragments in registers: what these tiles' small accumulators leave room for).
    static constexpr bool X_BY_KBLOCK = PRECISION == Precision::Tf32 && M_ATOMS == 1 && TILE_N <= 128;

    // mma_tile_smem_x: take each stage's address through a shuffle from lane 0, so that ptxas
    // builds the wgmma descriptors in uniform registers (no R2UR per wgmma, far fewer mainloop
    // instructions). Only in the 64-row ping-pongs, whose k-step is one short wgmma: they ran
    // faster with it. The 128-row ping-pong (two 64-row wgmmas per k-step) ran slower, its
    // tensor cores busy enough that the shuffles between the full-barrier wait and the first
    // wgmma cost more than the issue slots saved; the cooperative tile ran the same
    // (docs/BENCHMARKS.md, "Uniform wgmma descriptors").
    static constexpr bool UNIFORM_DESCRIPTORS = M_ATOMS == 1 && !COOPERATIVE;
    using Storage = SharedStorage<TILE_M, TILE_N, TILE_K, STAGES, W_PARTS>;
    using Raster = GroupedRaster<TILE_M * CLUSTER_M, TILE_N, GROUP_M>;  // over cluster tiles
    using Epilogue = EPILOGUE_;  // thread-scope functor applied to each accumulator before the store

    static constexpr uint32_t SMEM_BYTES = kSmemBytes<TILE_M, TILE_N, TILE_K, STAGES, W_PARTS>;
    // Named barrier ids (0 is __syncthreads): ORDER_BARRIER + c is "consumer c may start its mainloop".
    static constexpr uint32_t ORDER_BARRIER = 1;
    static constexpr uint32_t ORDER_BARRIER_THREADS = 2 * WARPGROUP_THREADS;
    // WARPGROUP_BARRIER + c: the 128 threads of consumer c (stream-K hand-off; the epilogue's
    // boxes are per warp and need none).
    static constexpr uint32_t WARPGROUP_BARRIER = 3;
    // Stream-K (GeStreamK; the schedule's "CTAs" are clusters): one partial slot per cluster of
    // CLUSTER_M * TILE_M * TILE_N floats, one consumer's part (CONSUMER_ROWS x TILE_N, fragment
    // order) at (rank * TILE_M + part * CONSUMER_ROWS) * TILE_N; CLUSTER_M * TILE_PARTS ready
    // words per cluster, one per (rank, part).
    static constexpr int STREAM_K_SLOT_FLOATS = CLUSTER_M * TILE_M * TILE_N;
    // Partials a stream-K finisher loads at once (add_partials): their L2 round trips overlap,
    // which matters at small M, where one finisher adds up to a wave's worth of them. Each
    // costs another accumulator's registers, which only the 64x64 tile's 32, fed from shared
    // memory, leave room for below __launch_bounds__'s 168 per thread (the kernels that load X
    // fragments into registers spill with it: build/nvcc-resource-usage.txt).
    static constexpr int STREAM_K_IN_FLIGHT =
        M_ATOMS * ACC_PER_ATOM <= 32 && PRECISION == Precision::Tf32Truncated ? 4 : 1;

    static_assert(TILE_N == 64 || TILE_N == 128 || TILE_N == 256,
                  "wrapped wgmma shapes: m64n64k8, m64n128k8, m64n256k8");
    static_assert(CONSUMER_ROWS % WGMMA_M == 0, "rows per consumer: multiple of 64 (one warpgroup wgmma)");
    static_assert(M_ATOMS * ACC_PER_ATOM <= 128, "accumulator above 128 registers per thread");
    static_assert(M_ATOMS * ACC_PER_ATOM * WARPGROUP_THREADS == CONSUMER_ROWS * TILE_N,
                  "a consumer's partial is its rows");
    static_assert(TILE_M <= 256 && TILE_N <= 256, "TMA boxDim is at most 256 per dimension");
    static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "cluster of 1 or 2 CTAs along M");
    static_assert((W_BOX_ROWS * TILE_K * 4) % kSwizzleAtomBytes == 0, "W slices must stay swizzle-atom aligned");
    static_assert(SMEM_BYTES <= 232448, "dynamic smem above the sm_90 per-CTA limit (227 KiB)");
};

}  // namespace ge::sm90
