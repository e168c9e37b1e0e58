// The unfused baseline's second pass: after a GEMM wrote acc into `out`, apply the fused kernels'
// epilogue functor in place, out = f(acc + bias) + beta * C, each element rounded as the fused
// kernels round it for the same v (so "cuBLAS + this" is PyTorch's unfused route, bitwise its
// expression for cuBLAS's v). Memory-bound: one read and one write of out (and one read of C),
// 16 bytes a thread where rows allow it. Used by benches and tests to build "cuBLAS + elementwise";
// not by the fused path.
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "../include/gemm_epilogue.h"

namespace ge::elementwise {

__device__ __forceinline__ bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Rows [row_first, m) step row_step; groups of 4 columns [group_first, ..) step group_step.
// Two loops instead of one flat index: no 64-bit division per element.
__device__ __forceinline__ void epilogue_pass(const GeElementwiseParams &p, int row_first, int row_step,
                                              int group_first, int group_step) {
    const GeEpilogue &e = p.epilogue;
    // The fused kernels' functor, from the same GeEpilogue.
    const auto epi = epilogue::ActivationResidual::of(e, p.bias);
    const bool has_c = e.source != nullptr;
    // Whole float4s when every row of out (and of C) starts 16-byte aligned.
    const bool quads = p.ldo % 4 == 0 && aligned16(p.out) && (!has_c || (e.ldc % 4 == 0 && aligned16(e.source)));
    const int groups = (p.n + 3) / 4;
    // The activation chosen once for the launch (uniform), the loop compiled once per activation
    // with f inlined: the seed form's loop is the plain `v*s + v` pass it always was, and no form
    // pays a switch per element.
    epi.with_activation([&](auto f) {
        // finish() of one element, with f for activate(): v = acc + bias, f(v), then + beta * c.
        const auto finish = [&](float acc, int col, float c) {
            return epi.add_source(f(epi.linear(acc, epi.bias_at(col))), c);
        };
        for (int row = row_first; row < p.m; row += row_step) {
            float *out_row = p.out + int64_t(row) * p.ldo;
            // Plain loads of C, never the read-only path: C may be out, which this thread writes.
            const float *c_row = has_c ? epi.source_at(row, 0) : nullptr;
            for (int g = group_first; g < groups; g += group_step) {
                const int col = 4 * g;
                float *dst = out_row + col;
                if (quads && col + 4 <= p.n) {
                    float4 v = *reinterpret_cast<float4 *>(dst);
                    const float4 c = has_c ? *reinterpret_cast<const float4 *>(c_row + col) : make_float4(0, 0, 0, 0);
                    v.x = finish(v.x, col, c.x);
                    v.y = finish(v.y, col + 1, c.y);
                    v.z = finish(v.z, col + 2, c.z);
                    v.w = finish(v.w, col + 3, c.w);
                    *reinterpret_cast<float4 *>(dst) = v;
                } else {
                    for (int cc = col; cc < min(col + 4, p.n); ++cc) {
                        const float c = has_c ? c_row[cc] : 0.0f;
                        dst[cc - col] = finish(dst[cc - col], cc, c);
                    }
                }
            }
        }
    });
}

}  // namespace ge::elementwise

// Launch: block (256,1,1), grid (x, y) with x * 256 threads covering a row's column groups and
// y rows in flight; any grid is correct.
extern "C" __global__ void __launch_bounds__(256) ge_elementwise_epilogue(const GeElementwiseParams p) {
    ge::elementwise::epilogue_pass(p, blockIdx.y, gridDim.y, blockIdx.x * blockDim.x + threadIdx.x,
                                   gridDim.x * blockDim.x);
}
