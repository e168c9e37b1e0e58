// Repack of an operand into a dense, 16-byte-aligned copy (rows of whole 128-byte lines, padding
// zeroed): for rows that TMA or 16-byte loads cannot read, and for the conversions a kernel
// expects done before it (GeRepackParams.mode: copied, rounded to TF32, or split into 3xTF32's
// two parts). Memory-bound: each element read once and written once (twice when split); loads
// are 4-byte (the source has no better alignment), stores are 16-byte.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../include/gemm_epilogue.h"

namespace ge::elementwise {

// Rows [row_first, rows) step row_step; quads (4 destination columns) [quad_first, ..) step
// quad_step. Two loops instead of one flat index: no 64-bit division per element.
__device__ __forceinline__ void repack_tf32(const GeRepackParams &p, int row_first, int row_step, int quad_first,
                                            int quad_step) {
    const int quads = int(p.ld_dst / 4);
    for (int row = row_first; row < p.rows; row += row_step) {
        const float *src = p.src + int64_t(row) * p.ld_src;
        float *dst = p.dst + int64_t(row) * p.ld_dst;
        for (int q = quad_first; q < quads; q += quad_step) {
            const int col = 4 * q;
            const auto at = [&](int c) { return c < p.cols ? src[c] : 0.0f; };
            float4 v = make_float4(at(col), at(col + 1), at(col + 2), at(col + 3));
            if (p.mode == GE_REPACK_SPLIT) {
                // The same split as the kernels' (ptx::split_tf32), with both parts rounded here.
                const float4 big =
                    make_float4(ptx::round_tf32(v.x), ptx::round_tf32(v.y), ptx::round_tf32(v.z), ptx::round_tf32(v.w));
                const float4 small =
                    make_float4(ptx::round_tf32(__fsub_rn(v.x, big.x)), ptx::round_tf32(__fsub_rn(v.y, big.y)),
                                ptx::round_tf32(__fsub_rn(v.z, big.z)), ptx::round_tf32(__fsub_rn(v.w, big.w)));
                *reinterpret_cast<float4 *>(dst + p.small_offset + col) = small;
                v = big;
            } else if (p.mode == GE_REPACK_ROUND) {
                v = make_float4(ptx::round_tf32(v.x), ptx::round_tf32(v.y), ptx::round_tf32(v.z), ptx::round_tf32(v.w));
            }
            *reinterpret_cast<float4 *>(dst + col) = v;
        }
    }
}

}  // namespace ge::elementwise

// Launch: block (256,1,1), grid (x, y) with x * 256 threads covering a row's quads and y rows
// in flight; any grid is correct.
extern "C" __global__ void __launch_bounds__(256) ge_repack_tf32(const GeRepackParams p) {
    ge::elementwise::repack_tf32(p, blockIdx.y, gridDim.y, blockIdx.x * blockDim.x + threadIdx.x,
                                 gridDim.x * blockDim.x);
}
