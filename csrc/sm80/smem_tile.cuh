// Thread-scope copies of one K-slice of an operand, global -> shared, through cp.async.
//
// Shared layout of an operand tile: (ROWS, 32) fp32, 128 bytes a row. The 16-byte chunk c of row
// r is stored at chunk c ^ (r % 8) (XOR swizzle), so that both the cp.async writes (8 chunks of
// one row per quarter-warp) and the ldmatrix phases (one logical chunk of 8 consecutive rows)
// touch 32 distinct banks.
//
// Thread tid copies chunk c = tid % 8 of the row pair (r, r + 8) for every pass j,
//     r = j * 2P + (p / 8) * 16 + p % 8,   p = tid / 8,   P = THREADS / 8 (row pairs per pass):
// rows 8 apart share the swizzle term, so one destination address serves every copy.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../common/ptx_sm80.cuh"
#include "config.cuh"

namespace ge::sm80 {

// Offset in floats of chunk `chunk` of row `row` inside a swizzled (ROWS, 32) tile.
__device__ __forceinline__ int chunk_offset(int row, int chunk) { return row * 32 + ((chunk ^ (row & 7)) << 2); }

template <int ROWS, int THREADS, OperandAccess ACCESS>
struct SmemTileLoader {
    static constexpr int PAIRS_PER_PASS = THREADS / 8;
    static constexpr int ROWS_PER_PASS = 2 * PAIRS_PER_PASS;
    static constexpr int PASSES = ROWS / ROWS_PER_PASS;
    static_assert(THREADS % 64 == 0 && ROWS % ROWS_PER_PASS == 0, "row pairs must tile the rows evenly");
    // Fully unrolled, the 4-byte path's 8 copies a pass keep too many addresses live.
    static constexpr int UNROLL_PASSES = ACCESS == OperandAccess::Vec4 ? PASSES : 1;

    // First row of this thread's pair in pass 0; the chunk it owns.
    __device__ __forceinline__ static int first_row(int tid) { return ((tid >> 3) >> 3) * 16 + ((tid >> 3) & 7); }

    // Copies rows [row0, row0 + ROWS) x columns [k0, k0 + 32) of a row-major operand (row stride ld,
    // `rows` valid rows, `k` valid columns) into `tile`, (ROWS, 32) fp32 in smem. Out-of-range
    // elements are zero-filled (cp.async with src-size 0 reads nothing), so the mainloop needs no
    // predication.
    __device__ __forceinline__ static void load(float *tile, const float *gmem, int64_t ld, int rows, int k, int row0,
                                                int k0, int tid) {
        const int r = first_row(tid), chunk = tid & 7;
        const int gk = k0 + chunk * 4;
        const float *src = gmem + int64_t(row0 + r) * ld + gk;
        const uint32_t dst = ge::ptx::smem_addr(tile + chunk_offset(r, chunk));
#pragma unroll(UNROLL_PASSES)
        for (int j = 0; j < PASSES; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // rows r and r + 8: same swizzle term, 8 rows apart
                const int row = row0 + r + j * ROWS_PER_PASS + 8 * h;
                const float *p = src + (j * ROWS_PER_PASS + 8 * h) * ld;
                const uint32_t d = dst + (j * ROWS_PER_PASS + 8 * h) * 32 * 4;
                if constexpr (ACCESS == OperandAccess::Vec4) {
                    ge::ptx::cp_async_16(d, p, row < rows && gk < k);  // k % 4 == 0: all in or all out
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) ge::ptx::cp_async_4(d + 4 * e, p + e, row < rows && gk + e < k);
                }
            }
        }
    }
};

}  // namespace ge::sm80
