// Thread-scope copies of one K-slice of an operand, global -> shared, through cp.async.
//
// Shared layout of an operand tile: (ROWS, 32) fp32, K-major, 128 bytes a row. The 16-byte chunk
// c of row r is stored at chunk c ^ (r % 8) (XOR swizzle), so that both the cp.async writes
// (8 chunks of one row per quarter-warp) and the mma fragment reads (rows g = 0..7 at column t)
// touch 32 distinct banks.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "config.cuh"

namespace ge::sm80 {

// Offset in floats of element (row, k) inside a swizzled (ROWS, 32) tile.
__device__ __forceinline__ int swizzled_offset(int row, int k) {
    return row * 32 + ((((k >> 2) ^ row) & 7) << 2) + (k & 3);
}

// Copies rows [row0, row0 + Rows) x columns [k0, k0 + 32) of a row-major operand (row stride ld,
// `rows` valid rows, `k` valid columns) into `tile`. Out-of-range elements are zero-filled, so
// the mainloop needs no predication.
template <int Rows, int Threads, OperandAccess Access>
struct SmemTileLoader {
    __device__ __forceinline__ static void load(float *tile, const float *gmem, int64_t ld, int rows,
                                                int k, int row0, int k0, int tid) {
        if constexpr (Access == OperandAccess::Vec4) {
            constexpr int kChunks = Rows * 8;  // 16-byte chunks in the tile
            static_assert(kChunks % Threads == 0, "uneven chunk split");
#pragma unroll
            for (int i = 0; i < kChunks / Threads; ++i) {
                const int c = tid + i * Threads;
                const int r = c >> 3, chunk = c & 7;
                const int grow = row0 + r, gk = k0 + chunk * 4;
                const bool valid = grow < rows && gk < k;  // k % 4 == 0: a chunk is all in or all out
                const float *src = valid ? gmem + int64_t(grow) * ld + gk : gmem;
                ptx::cp_async_16(ptx::smem_addr(tile + r * 32 + ((chunk ^ (r & 7)) << 2)), src, valid);
            }
        } else {
            constexpr int kElems = Rows * 32;
            static_assert(kElems % Threads == 0, "uneven element split");
#pragma unroll 4  // fully unrolled, the 4-byte copies' addresses spill the large tile's registers
            for (int i = 0; i < kElems / Threads; ++i) {
                const int e = tid + i * Threads;  // a warp reads 32 consecutive k of one row
                const int r = e >> 5, kk = e & 31;
                const int grow = row0 + r, gk = k0 + kk;
                const bool valid = grow < rows && gk < k;
                const float *src = valid ? gmem + int64_t(grow) * ld + gk : gmem;
                ptx::cp_async_4(ptx::smem_addr(tile + swizzled_offset(r, kk)), src, valid);
            }
        }
    }
};

}  // namespace ge::sm80
