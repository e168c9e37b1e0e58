// A mma.sync kernel configuration: the shapes, composed into one type (CUTLASS style).
#pragma once

#include "../common/epilogue.cuh"

namespace ge::sm80 {

// How a stage of X and W travels from global to shared memory.
enum class OperandAccess {
    Vec4,    // 16-byte cp.async: k % 4 == 0, 16-byte-aligned x/w, ldx/ldw multiples of 4
    Scalar,  // 4-byte cp.async: any k, any 4-byte-aligned pointer and leading dimension
};

// How fp32 operands become TF32 before the tensor core sees them.
enum class Rounding {
    Nearest,   // to nearest, ties away, in registers after each fragment load (what cuBLAS does)
    Truncate,  // raw fp32 bits; the tensor core ignores the low 13 mantissa bits
};

// How the epilogue writes the finished tile to global memory (measured on the H200, reference
// shape, docs/TILING.md): straight from registers is as fast or faster for the truncating
// kernels, and 4.5 % faster for 128x128 tiles, whose two CTAs per SM overlap one's epilogue with
// the other's mainloop; staging is 1.3 % faster for the 128x256 rounding kernel, and frees the
// registers that kernel otherwise spills.
enum class EpilogueStore {
    Registers,  // straight from the mma fragments: float2 per thread, 8 rows per warp store
    Staged,     // through the (then idle) stage buffers: whole 16-byte chunks along out's rows
};

template <int TileM_, int TileN_, int TileK_,  // CTA tile (BLK_M, BLK_N, BLK_K)
          int WarpM_, int WarpN_,              // warp tile
          int Stages_,                         // cp.async pipeline depth
          OperandAccess Access_,
          Rounding Rounding_ = Rounding::Nearest,
          EpilogueStore Store_ = EpilogueStore::Registers,
          class Epilogue_ = epilogue::BiasScaleResidual>  // applied to each accumulator
struct Config {
    static constexpr int kTileM = TileM_;
    static constexpr int kTileN = TileN_;
    static constexpr int kTileK = TileK_;
    static constexpr int kWarpM = WarpM_;
    static constexpr int kWarpN = WarpN_;
    static constexpr int kStages = Stages_;
    static constexpr OperandAccess kAccess = Access_;
    static constexpr Rounding kRounding = Rounding_;
    static constexpr EpilogueStore kStore = Store_;
    using Epilogue = Epilogue_;

    // Instruction: mma.sync.aligned.m16n8k8 tf32.
    static constexpr int kInstM = 16, kInstN = 8, kInstK = 8;

    static constexpr int kWarpsM = kTileM / kWarpM;
    static constexpr int kWarpsN = kTileN / kWarpN;
    static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
    static constexpr int kFragsM = kWarpM / kInstM;  // m16 fragments per warp
    static constexpr int kFragsN = kWarpN / kInstN;  // n8 fragments per warp

    // Shared memory, per stage: X tile (kTileM, kTileK) then W tile (kTileN, kTileK), fp32, K-major.
    static constexpr int kStageFloats = (kTileM + kTileN) * kTileK;
    static constexpr int kSmemBytes = kStages * kStageFloats * 4;

    // L2 rasterisation: CTAs walk tile-rows in groups of this many so W stays hot.
    static constexpr int kRasterGroupM = 8;

    static_assert(kTileK == 32, "the XOR swizzle assumes 8 16-byte chunks per smem row");
    static_assert(kTileM % kWarpM == 0 && kTileN % kWarpN == 0, "warps must tile the CTA tile");
    static_assert(kWarpM % kInstM == 0 && kWarpN % kInstN == 0, "instructions must tile the warp");
    static_assert(kStages >= 3, "fewer than 3 stages cannot hide global latency");
    static_assert(kStore != EpilogueStore::Staged || kTileM * kTileN * 4 <= kSmemBytes,
                  "the staged epilogue holds the whole CTA tile in the stage buffers");
    static_assert(kTileN % 32 == 0, "staged rows: whole groups of 8 16-byte chunks (the XOR swizzle)");
    static_assert((kTileM * kTileK / 4) % kThreads == 0 && (kTileN * kTileK / 4) % kThreads == 0,
                  "every thread copies the same number of 16-byte chunks");
};

}  // namespace ge::sm80
