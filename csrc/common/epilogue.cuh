// Epilogue functors: what happens to one accumulator between the mainloop and the store.
// Thread-scope and stateless apart from their parameters; every kernel family calls the same
// functor, so the math (and its rounding) lives here once. See docs/EPILOGUE.md.
#pragma once

#include "../include/gemm_epilogue.h"

namespace ge::epilogue {

// out = (v * scale) + v,  v = acc + bias[col]   (bias absent: v = acc + -0.0 = acc)
//
// Rounding is exactly PyTorch's `y = linear(x); y * s + y.clone()`: v is rounded to fp32 once,
// t = v*s is rounded, then t + v is rounded. __fmul_rn/__fadd_rn are never contracted into an
// FMA by nvcc (unlike `v * s + v`, which -fmad=true would fuse into one rounding).
struct BiasScaleResidual {
    const float *bias;  // n values or nullptr
    float scale;

    __host__ __device__ static BiasScaleResidual from(const GeProblem &p) { return {p.bias, p.scale}; }

    // What operator() adds for one in-bounds output column: bias[col], or -0.0 without a bias.
    // -0.0 is the identity of IEEE addition (x + -0.0 == x for every x, +0.0 and -0.0
    // included; a NaN stays a NaN), so v needs no branch: a per-element `bias ? acc + b : acc`
    // cost a register copy and a predicated add per element in the sm90 epilogue's SASS.
    // Load once per column a thread owns.
    __device__ __forceinline__ float bias_at(int col) const { return bias ? __ldg(bias + col) : -0.0f; }

    // bias_value: bias_at(col) of the element's column.
    __device__ __forceinline__ float operator()(float acc, float bias_value) const {
        const float v = __fadd_rn(acc, bias_value);
        const float t = __fmul_rn(v, scale);
        return __fadd_rn(t, v);
    }
};

}  // namespace ge::epilogue
