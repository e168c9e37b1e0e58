// Shared-memory layout of the operand stages and the wgmma matrix descriptors that read it.
//
// Each operand tile is (ROWS, TILE_K = 32) fp32, K-major, written by TMA with SWIZZLE_128B:
// one 128-byte row per M (or N) index, 8 rows = one 1024-byte swizzle atom. wgmma reads it
// through a descriptor with the same 128B swizzle, so no bank conflicts and no repacking.
#pragma once

#include <cstdint>

#include "../include/gemm_epilogue.h"

namespace ge::sm90 {

// Bytes of one 128B swizzle atom (8 rows x 128 B); every tile starts on one of these so that
// the hardware's address-based swizzle matches TMA's (descriptor base_offset stays 0).
inline constexpr uint32_t kSwizzleAtomBytes = 1024;

// wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4
//   bits 16-29  leading-dimension byte offset >> 4 (unused for swizzled K-major; set to 1)
//   bits 32-45  stride-dimension byte offset >> 4 (next 8-row core-matrix group: 1024 B)
//   bits 49-51  base offset (0: tiles are 1024-byte aligned)
//   bits 62-63  swizzle mode (1 = 128B)
__device__ __forceinline__ uint64_t make_desc_k_major_sw128(uint32_t addr) {
    uint64_t desc = 0;
    desc |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
    desc |= static_cast<uint64_t>(1) << 16;
    desc |= static_cast<uint64_t>(kSwizzleAtomBytes >> 4) << 32;
    desc |= static_cast<uint64_t>(1) << 62;
    return desc;
}

// Advancing along K inside the 128-byte swizzled row is a plain start-address offset
// (the swizzle is applied to the final address), in 16-byte descriptor units.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// Epilogue staging per consumer warpgroup: (STORE_BOX_ROWS, STORE_BOX_COLS) fp32 boxes,
// 128B-swizzled like the operand tiles (conflict-free fragment writes; TMA stores the same
// layout), an equal share per warp (epilogue_store.cuh).
inline constexpr uint32_t kStoreBoxCols = GE_SM90_STORE_BOX_COLS;
inline constexpr int kStoreBoxRows = GE_SM90_STORE_BOX_ROWS;
inline constexpr uint32_t kEpilogueFloatsPerConsumer = GE_SM90_EPILOGUE_SMEM_BYTES / sizeof(float) / 2;

// The CTA's dynamic shared memory, carved from a 1024-byte aligned base:
//   x[s]: (TILE_M, TILE_K) fp32, 128B-swizzled, stage s
//   w[s]: (TILE_N, TILE_K) fp32, 128B-swizzled, stage s; with W_PARTS = 2 (Tf32x3) followed by
//         W's small parts, another (TILE_N, TILE_K) tile (the big parts come first)
//   c[i]: consumer i's epilogue boxes, (STORE_BOX_ROWS, STORE_BOX_COLS) fp32 each, a quarter
//         of them per warp (epilogue_store.cuh)
//   full[s]  : TMA -> consumers ("stage s holds data"), 1 arrival + tx bytes
//   empty[s] : consumers -> producer ("stage s may be overwritten"), one arrival per releasing
//              consumer warp of every CTA in the cluster
template <int TILE_M, int TILE_N, int TILE_K, int STAGES, int W_PARTS>
struct SharedStorage {
    static constexpr uint32_t X_BYTES = TILE_M * TILE_K * sizeof(float);
    static constexpr uint32_t W_BYTES = TILE_N * TILE_K * sizeof(float);  // one part
    static constexpr uint32_t W_PART_FLOATS = TILE_N * TILE_K;            // from a part to the next
    static_assert(TILE_K * sizeof(float) == 128, "TILE_K must span exactly one 128B swizzle row");
    static_assert(X_BYTES % kSwizzleAtomBytes == 0 && W_BYTES % kSwizzleAtomBytes == 0,
                  "tiles must be whole swizzle atoms to keep every stage 1024-byte aligned");

    alignas(1024) float x[STAGES][TILE_M * TILE_K];
    alignas(1024) float w[STAGES][W_PARTS * TILE_N * TILE_K];
    alignas(1024) float c[2][kEpilogueFloatsPerConsumer];
    uint64_t full[STAGES];
    uint64_t empty[STAGES];
};

// Dynamic smem bytes the host must provide: the storage plus slack for aligning the base to 1024.
template <int TILE_M, int TILE_N, int TILE_K, int STAGES, int W_PARTS>
inline constexpr uint32_t kSmemBytes =
    sizeof(SharedStorage<TILE_M, TILE_N, TILE_K, STAGES, W_PARTS>) + kSwizzleAtomBytes;

}  // namespace ge::sm90
