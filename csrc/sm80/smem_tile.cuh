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
            // Thread -> (row r0 + i * kRowStep, chunk): the chunk, and with it the swizzle term
            // (kRowStep is a multiple of 8), is the same for all i, so only the row moves.
            constexpr int kRowStep = Threads / 8;
            static_assert(Threads % 64 == 0 && Rows % kRowStep == 0, "uneven chunk split");
            const int r0 = tid >> 3, chunk = tid & 7;
            const bool k_in = k0 + chunk * 4 < k;  // k % 4 == 0: a chunk is all in or all out
            const float *src = gmem + int64_t(row0 + r0) * ld + (k0 + chunk * 4);
            const int64_t src_step = int64_t(kRowStep) * ld;
            const uint32_t dst = ptx::smem_addr(tile + r0 * 32 + ((chunk ^ (r0 & 7)) << 2));
#pragma unroll
            for (int i = 0; i < Rows / kRowStep; ++i) {
                const bool valid = k_in && row0 + r0 + i * kRowStep < rows;
                ptx::cp_async_16(dst + i * kRowStep * 32 * 4, valid ? src + i * src_step : gmem, valid);
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
