// A mma.sync kernel configuration: the shapes and policies, composed into one type (CUTLASS
// style). Named like the sm90 family's KernelConfig (../sm90/config.cuh).
#pragma once

#include "../common/epilogue.cuh"
#include "../common/precision.cuh"
#include "../common/tile_raster.cuh"

namespace ge::sm80 {

// How a stage of X and W travels from global to shared memory.
enum class OperandAccess {
    Vec4,    // 16-byte cp.async: k % 4 == 0, 16-byte-aligned x/w, ldx/ldw multiples of 4
    Scalar,  // 4-byte cp.async: any k, any 4-byte-aligned pointer and leading dimension
};

// How the epilogue writes the finished tile to global memory. Straight from registers suits the
// truncating kernels and the 128x128 tiles, whose two CTAs per SM overlap one's epilogue with
// the other's mainloop; staging suits the 128x256 rounding kernel, and frees the registers that
// kernel otherwise spills (docs/BENCHMARKS.md).
enum class EpilogueStore {
    Registers,  // straight from the mma fragments: float2 per thread, 8 rows per warp store
    Staged,     // through the (then idle) stage buffers: whole 16-byte chunks along out's rows
};

template <int TILE_M_, int TILE_N_, int TILE_K_,  // CTA tile
          int WARP_M_, int WARP_N_,               // warp tile
          int STAGES_,                            // cp.async pipeline depth
          OperandAccess ACCESS_, Precision PRECISION_, EpilogueStore STORE_,
          int GROUP_M_ = 8,                                // raster group height (tiles) for L2 reuse
          class EPILOGUE_ = epilogue::ActivationResidual>  // applied to each accumulator
struct KernelConfig {
    static constexpr int TILE_M = TILE_M_;
    static constexpr int TILE_N = TILE_N_;
    static constexpr int TILE_K = TILE_K_;
    static constexpr int WARP_M = WARP_M_;
    static constexpr int WARP_N = WARP_N_;
    static constexpr int STAGES = STAGES_;
    static constexpr OperandAccess ACCESS = ACCESS_;
    static constexpr Precision PRECISION = PRECISION_;
    static constexpr EpilogueStore STORE = STORE_;
    static constexpr int GROUP_M = GROUP_M_;
    using Epilogue = EPILOGUE_;

    // Instruction: mma.sync.aligned.m16n8k8 tf32.
    static constexpr int INST_M = 16, INST_N = 8, INST_K = 8;

    static constexpr int WARPS_M = TILE_M / WARP_M;
    static constexpr int WARPS_N = TILE_N / WARP_N;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int FRAGS_M = WARP_M / INST_M;  // m16 fragments per warp
    static constexpr int FRAGS_N = WARP_N / INST_N;  // n8 fragments per warp

    // Shared memory, per stage: X tile (TILE_M, TILE_K) then W tile (TILE_N, TILE_K), fp32, K-major.
    static constexpr int STAGE_FLOATS = (TILE_M + TILE_N) * TILE_K;
    static constexpr int SMEM_BYTES = STAGES * STAGE_FLOATS * 4;

    using Raster = GroupedRaster<TILE_M, TILE_N, GROUP_M>;

    static_assert(TILE_K == 32, "the XOR swizzle assumes 8 16-byte chunks per smem row");
    static_assert(TILE_M % WARP_M == 0 && TILE_N % WARP_N == 0, "warps must tile the CTA tile");
    static_assert(WARP_M % INST_M == 0 && WARP_N % INST_N == 0, "instructions must tile the warp");
    static_assert(STAGES >= 3, "fewer than 3 stages cannot hide global latency");
    static_assert(STORE != EpilogueStore::Staged || TILE_M * TILE_N * 4 <= SMEM_BYTES,
                  "the staged epilogue holds the whole CTA tile in the stage buffers");
    static_assert(TILE_N % 32 == 0, "staged rows: whole groups of 8 16-byte chunks (the XOR swizzle)");
    static_assert((TILE_M * TILE_K / 4) % THREADS == 0 && (TILE_N * TILE_K / 4) % THREADS == 0,
                  "every thread copies the same number of 16-byte chunks");
};

}  // namespace ge::sm80
