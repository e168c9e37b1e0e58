// A GEMV kernel configuration (decoding-size X, CUDA cores): the shapes and policies composed
// into one type, named like the other families' KernelConfig.
#pragma once

#include "../common/epilogue.cuh"
#include "../common/precision.cuh"

namespace ge::gemv {

template <int TILE_M_,  // rows of X (and of out) one CTA covers: all of them, m <= TILE_M
          int TILE_N_,  // rows of W (columns of out) per CTA, every warp on all of them
          int WARPS_,   // warps per CTA, on interleaved chunks of K
          int UNROLL_,  // chunks per warp and loop trip: the 16-byte loads a lane has in flight
          Precision PRECISION_, class EPILOGUE_ = epilogue::ActivationResidual>
struct KernelConfig {
    static constexpr int TILE_M = TILE_M_;
    static constexpr int TILE_N = TILE_N_;
    static constexpr int WARPS = WARPS_;
    static constexpr int UNROLL = UNROLL_;
    static constexpr Precision PRECISION = PRECISION_;
    using Epilogue = EPILOGUE_;

    static constexpr int THREADS = 32 * WARPS;
    // A chunk: 32 lanes x 4 floats of k, 512 contiguous bytes of each W row per warp load.
    static constexpr int CHUNK_K = 128;
    // k per CTA and loop trip: what the name's third number says.
    static constexpr int TILE_K = CHUNK_K * WARPS * UNROLL;
    static constexpr int TILE_ELEMS = TILE_M * TILE_N;

    static_assert(TILE_M >= 1 && TILE_N >= 1 && WARPS >= 1 && UNROLL >= 1, "a non-empty tile");
    static_assert(TILE_ELEMS <= THREADS, "one thread per output element in the reduction");
};

}  // namespace ge::gemv
