// A skinny kernel configuration (decoding-size X: every row of X in one CTA tile): the shapes
// and policies composed into one type, named like the other families' KernelConfig.
#pragma once

#include "../common/epilogue.cuh"
#include "../common/precision.cuh"

namespace ge::skinny {

template <int TILE_M_,  // rows of X (and of out) one CTA covers: all of them, m <= TILE_M
          int TILE_N_,  // rows of W (columns of out) per CTA: one m16 A fragment
          int TILE_K_,  // k per warp step: 4 lanes x 4 floats x LOADS 16-byte copies per W row
          int WARPS_,   // warps per CTA, on interleaved k-steps of the same rows of W
          int STAGES_,  // steps in each warp's cp.async ring
          Precision PRECISION_, class EPILOGUE_ = epilogue::ActivationResidual>
struct KernelConfig {
    static constexpr int TILE_M = TILE_M_;
    static constexpr int TILE_N = TILE_N_;
    static constexpr int TILE_K = TILE_K_;
    static constexpr int WARPS = WARPS_;
    static constexpr int STAGES = STAGES_;
    static constexpr Precision PRECISION = PRECISION_;
    using Epilogue = EPILOGUE_;

    // Instruction: mma.sync.aligned.m16n8k8 tf32, W as A (16 rows of W), X as B (8 rows of X).
    static constexpr int INST_N = 16, INST_M = 8, INST_K = 8;

    static constexpr int THREADS = 32 * WARPS;
    static constexpr int X_FRAGS = TILE_M / INST_M;  // n8 B fragments (8 rows of X each)
    static constexpr int LOADS = TILE_K / 16;        // 16-byte copies per lane per row and step
    static constexpr int TILE_ELEMS = TILE_M * TILE_N;
    // 16-byte slots per lane and stage: LOADS x (2 W rows + X_FRAGS X rows).
    static constexpr int SLOTS = LOADS * (2 + X_FRAGS);
    static constexpr int WARP_STAGE_BYTES = SLOTS * 32 * 16;
    static constexpr int STAGE_BYTES = WARPS * WARP_STAGE_BYTES;
    // Dynamic shared memory: the rings (the reduction's tiles are static, cluster_reduce.cuh).
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;

    static_assert(TILE_N == INST_N, "one m16 A fragment of W rows per CTA");
    static_assert(TILE_M % INST_M == 0 && TILE_M > 0, "whole n8 fragments of X rows");
    static_assert(TILE_K % 16 == 0, "a quad of lanes covers 16 k per copy");
    static_assert(STAGES >= 2, "a ring of at least two steps");
};

}  // namespace ge::skinny
