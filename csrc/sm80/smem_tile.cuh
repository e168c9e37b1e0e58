// Thread-scope copies of one K-slice of an operand, global -> shared, through cp.async, and the
// in-place pass that rounds them to TF32 and (for X) interleaves row pairs for the mma fragments.
//
// Shared layout of an operand tile: (ROWS, 32) fp32, 128 bytes a row. The 16-byte chunk c of row
// r is stored at chunk c ^ (r % 8) (XOR swizzle), so that both the cp.async writes (8 chunks of
// one row per quarter-warp) and the fragment reads (rows g = 0..7, chunks 2t + q) touch 32
// distinct banks.
//
// Ownership: thread tid copies chunk c = tid % 8 of the row pair (r, r + 8) for every pass j,
//     r = j * 2P + (p / 8) * 16 + p % 8,   p = tid / 8,   P = THREADS / 8 (row pairs per pass),
// so after its copies land it can round, and permute, its own 32 bytes without a barrier.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "config.cuh"

namespace ge::sm80 {

// Offset in floats of chunk `chunk` of row `row` inside a swizzled (ROWS, 32) tile.
__device__ __forceinline__ int chunk_offset(int row, int chunk) { return row * 32 + ((chunk ^ (row & 7)) << 2); }

// Layout of a tile after SmemTileLoader::finish().
enum class TileOrder {
    KMajor,           // slot (r, c) holds row r, k = 4c .. 4c+3 (the W tile)
    RowPairsInterleaved,  // for r % 16 < 8: slot (r, c) holds (r, 4c), (r+8, 4c), (r, 4c+1), (r+8, 4c+1)
                          // and slot (r+8, c) the same for k = 4c+2, 4c+3 (the X tile): one
                          // LDS.128 then yields a whole m16n8k8 A fragment (see warp_mma.cuh)
};

template <int Rows, int Threads, OperandAccess Access, TileOrder Order>
struct SmemTileLoader {
    static constexpr int kPairsPerPass = Threads / 8;
    static constexpr int kRowsPerPass = 2 * kPairsPerPass;
    static constexpr int kPasses = Rows / kRowsPerPass;
    static_assert(Threads % 64 == 0 && Rows % kRowsPerPass == 0, "row pairs must tile the rows evenly");
    // Fully unrolled, the 4-byte path's 8 copies a pass keep too many addresses live.
    static constexpr int kUnrollPasses = Access == OperandAccess::Vec4 ? kPasses : 1;

    // First row of this thread's pair in pass 0; the chunk it owns.
    __device__ __forceinline__ static int first_row(int tid) { return ((tid >> 3) >> 3) * 16 + ((tid >> 3) & 7); }

    // Copies rows [row0, row0 + Rows) x columns [k0, k0 + 32) of a row-major operand (row stride ld,
    // `rows` valid rows, `k` valid columns) into `tile`. Out-of-range elements are zero-filled
    // (cp.async with src-size 0 reads nothing), so the mainloop needs no predication.
    __device__ __forceinline__ static void load(float *tile, const float *gmem, int64_t ld, int rows, int k,
                                                int row0, int k0, int tid) {
        const int r = first_row(tid), chunk = tid & 7;
        const int gk = k0 + chunk * 4;
        const float *src = gmem + int64_t(row0 + r) * ld + gk;
        const uint32_t dst = ptx::smem_addr(tile + chunk_offset(r, chunk));
#pragma unroll(kUnrollPasses)
        for (int j = 0; j < kPasses; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // rows r and r + 8: same swizzle term, 8 rows apart
                const int row = row0 + r + j * kRowsPerPass + 8 * h;
                const float *p = src + (j * kRowsPerPass + 8 * h) * ld;
                const uint32_t d = dst + (j * kRowsPerPass + 8 * h) * 32 * 4;
                if constexpr (Access == OperandAccess::Vec4) {
                    ptx::cp_async_16(d, p, row < rows && gk < k);  // k % 4 == 0: all in or all out
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) ptx::cp_async_4(d + 4 * e, p + e, row < rows && gk + e < k);
                }
            }
        }
    }

    // Rounds this thread's copied elements to TF32 (nearest, ties away) in place and, for
    // RowPairsInterleaved, permutes them. Call after cp.async.wait_group made this thread's copies
    // of the stage visible to it and before the barrier that publishes the stage: every element is
    // then converted once, instead of once per warp that reads it.
    __device__ __forceinline__ static void finish(float *tile, int tid) {
        const int r = first_row(tid), chunk = tid & 7;
        float *first = tile + chunk_offset(r, chunk);
#pragma unroll
        for (int j = 0; j < kPasses; ++j) {
            float4 *lo = reinterpret_cast<float4 *>(first + j * kRowsPerPass * 32);  // row r
            float4 *hi = reinterpret_cast<float4 *>(first + (j * kRowsPerPass + 8) * 32);  // row r + 8
            float4 a = *lo, b = *hi;
            a = make_float4(ptx::round_tf32(a.x), ptx::round_tf32(a.y), ptx::round_tf32(a.z), ptx::round_tf32(a.w));
            b = make_float4(ptx::round_tf32(b.x), ptx::round_tf32(b.y), ptx::round_tf32(b.z), ptx::round_tf32(b.w));
            if constexpr (Order == TileOrder::RowPairsInterleaved) {
                *lo = make_float4(a.x, b.x, a.y, b.y);
                *hi = make_float4(a.z, b.z, a.w, b.w);
            } else {
                *lo = a;
                *hi = b;
            }
        }
    }
};

}  // namespace ge::sm80
