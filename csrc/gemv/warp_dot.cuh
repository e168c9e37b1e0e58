// Thread-scope products of the GEMV: each lane holds, for every (row of W, row of X) pair of the
// CTA, the sum over the k it loaded; the lanes' sums meet in cta_reduce.cuh.
//
// On the CUDA cores, one fp32 FMA per product: TF32 operands (rounded or truncated here, as the
// precision asks) multiply exactly in fp32 (11 x 11 significand bits), so the only rounding
// left is the accumulation's, as on the tensor cores. Tf32x3 multiplies the fp32 operands as
// they are: the fp32 product 3xTF32 emulates (within its bound: 3xTF32 also drops small*small).
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "config.cuh"

namespace ge::gemv {

template <class Cfg>
struct WarpDot {
    float acc[Cfg::TILE_N][Cfg::TILE_M];

    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int r = 0; r < Cfg::TILE_N; ++r)
#pragma unroll
            for (int m = 0; m < Cfg::TILE_M; ++m) acc[r][m] = 0.0f;
    }

    // The operand as the precision multiplies it.
    __device__ __forceinline__ static float convert(float v) {
        if constexpr (Cfg::PRECISION == Precision::Tf32)
            return __uint_as_float(ge::ptx::add_half_ulp_tf32(__float_as_uint(v)) & 0xffffe000u);
        else if constexpr (Cfg::PRECISION == Precision::Tf32Truncated)
            return __uint_as_float(__float_as_uint(v) & 0xffffe000u);
        else
            return v;
    }

    __device__ __forceinline__ static float4 convert(float4 v) {
        return make_float4(convert(v.x), convert(v.y), convert(v.z), convert(v.w));
    }

    // acc[r][m] += w[r] . x[m] over four values of k, in k order.
    __device__ __forceinline__ void fma(const float4 (&w)[Cfg::TILE_N], const float4 (&x)[Cfg::TILE_M]) {
#pragma unroll
        for (int r = 0; r < Cfg::TILE_N; ++r) {
            const float4 a = convert(w[r]);
#pragma unroll
            for (int m = 0; m < Cfg::TILE_M; ++m) {
                float s = acc[r][m];
                s = __fmaf_rn(a.x, x[m].x, s);
                s = __fmaf_rn(a.y, x[m].y, s);
                s = __fmaf_rn(a.z, x[m].z, s);
                s = __fmaf_rn(a.w, x[m].w, s);
                acc[r][m] = s;
            }
        }
    }
};

}  // namespace ge::gemv
