// Epilogue functors: what happens to one accumulator between the mainloop and the store.
// Thread-scope and stateless apart from their parameters; every kernel family calls the same
// functor, so the math (and its rounding) lives here once. See docs/EPILOGUE.md.
#pragma once

#include "../include/gemm_epilogue.h"

namespace ge::epilogue {

// ---- f(v), each rounded as PyTorch 2.x's CUDA kernel for the same expression --------------
// Written with _rn intrinsics so that nvcc contracts nothing PyTorch's build does not: its
// kernels compile with -fmad=true, so an FMA appears exactly where PyTorch's source has a
// product feeding an addition (gelu_tanh's inner sum, the residual's add), nowhere else.

// `y * s + y.clone()`: t = v*s rounded, then t + v rounded (two ops, never an FMA).
__device__ __forceinline__ float scale_add(float v, float s) { return __fadd_rn(__fmul_rn(v, s), v); }

// max(v, floor) with NaN passed through (fmaxf alone would return floor for NaN): one
// `max.NaN` (sm_80+), whose NaN result is the canonical one. Every v the kernels pass here is an
// FADD's result (acc + bias), whose NaN is canonical already, so this is bitwise
// `v != v ? v : fmaxf(v, floor)` in one instruction instead of a compare and a select.
__device__ __forceinline__ float max_keep_nan(float v, float floor) {
    float y;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(v), "f"(floor));
    return y;
}

// `torch.relu`: clamp_min(v, 0) with NaN passed through.
__device__ __forceinline__ float relu(float v) { return max_keep_nan(v, 0.0f); }

// MUFU.EX2 and MUFU.RCP as libdevice and nvcc's division use them (no range scaling).
__device__ __forceinline__ float ex2_approx_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float rcp_approx_ftz(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// erff(x), bitwise CUDA's (libdevice's __nv_erff, checked on every float: python/tests/
// test_gpu_activations.py). libdevice picks one of two degree-6 polynomials by |x| and then
// runs one Horner chain on the chosen coefficients, which ptxas keeps in registers selected per
// element (seven selects, a predicate live to the end): in the sm_90 rolled epilogue that left
// room for two elements in flight. Here both chains run on immediates and only their results
// are selected: the same operations on the chosen side, so the same bits, in fewer registers.
//   |x| <  kBig: r = p(x*x) * x + x
//   |x| >= kBig: r = copysign(1 - 2^(p(|x|) * -|x| - |x|), x)
__device__ __forceinline__ float erf_rn(float x) {
    constexpr float kBig = 0x1.00c1fcp+0f;
    const float a = fabsf(x);
    const float t = __fmul_rn(x, x);
    float ps = __fmaf_rn(t, 0x1.63d2d4p-14f, -0x1.ae9a4p-11f);
    float pb = __fmaf_rn(a, 0x1.d69874p-14f, -0x1.5c00b6p-10f);
    ps = __fmaf_rn(t, ps, 0x1.55abd4p-8f);
    pb = __fmaf_rn(a, pb, 0x1.13233ep-7f);
    ps = __fmaf_rn(t, ps, -0x1.b837cep-6f);
    pb = __fmaf_rn(a, pb, -0x1.49b334p-5f);
    ps = __fmaf_rn(t, ps, 0x1.ce315ep-4f);
    pb = __fmaf_rn(a, pb, 0x1.46aa32p-3f);
    ps = __fmaf_rn(t, ps, -0x1.812758p-2f);
    pb = __fmaf_rn(a, pb, 0x1.d369f2p-1f);
    ps = __fmaf_rn(t, ps, 0x1.06eba6p-3f);
    pb = __fmaf_rn(a, pb, 0x1.421428p-1f);
    const float small = __fmaf_rn(ps, x, x);
    const float big = copysignf(__fadd_rn(1.0f, -ex2_approx_ftz(__fmaf_rn(pb, -a, -a))), x);
    return a >= kBig ? big : small;
}

// `F.gelu(v)`: v * 0.5 * (1 + erf(v * M_SQRT1_2)), left to right, in fp32.
__device__ __forceinline__ float gelu_erf(float v) {
    constexpr float kAlpha = 0.70710678118654752440f;  // M_SQRT1_2 as a float
    return __fmul_rn(__fmul_rn(v, 0.5f), __fadd_rn(1.0f, erf_rn(__fmul_rn(v, kAlpha))));
}

// `F.gelu(v, approximate="tanh")`: 0.5 * v * (1 + tanh(kBeta * (v + kKappa * v^3))), the inner
// sum an FMA (nvcc contracts `v + kKappa * x_cube` in PyTorch's kernel), v^3 = (v * v) * v.
__device__ __forceinline__ float gelu_tanh(float v) {
    constexpr float kBeta = static_cast<float>(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
    constexpr float kKappa = 0.044715f;
    const float cube = __fmul_rn(__fmul_rn(v, v), v);
    const float inner = __fmul_rn(kBeta, __fmaf_rn(kKappa, cube, v));
    return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));
}

// `F.silu(v)`: v / (1 + exp(-v)), IEEE division.
__device__ __forceinline__ float silu(float v) { return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v))); }

// v / d, correctly rounded, by nvcc's own fast path for `/`: MUFU.RCP, one Newton step, the
// quotient corrected by its exact remainder. nvcc guards it per division with FCHK and a branch
// to a slow path, which splits a row of SiLUs into one basic block per element (ptxas then runs
// them one after another); silu_row guards a whole row instead.
__device__ __forceinline__ float div_rn_fast(float v, float d) {
    float r = rcp_approx_ftz(d);
    r = __fmaf_rn(r, __fmaf_rn(-d, r, 1.0f), r);
    const float q = __fmul_rn(v, r);
    return __fmaf_rn(r, __fmaf_rn(-d, q, v), q);
}

// silu() of N values, bitwise (checked on every float: python/tests/test_gpu_activations.py).
// The fast path needs 1/d normal (d = 1 + exp(-v) below 2^126: v above -87) and a normal,
// nonzero quotient; a row with any value outside [-80, 2^100] or of magnitude below 2^-100 (or
// a NaN) goes through IEEE division.
template <int N>
__device__ __forceinline__ void silu_row(float (&v)[N]) {
    float d[N];
    bool fast = true;
#pragma unroll
    for (int e = 0; e < N; ++e) {
        d[e] = __fadd_rn(1.0f, expf(-v[e]));
        const float a = fabsf(v[e]);
        fast &= (v[e] >= -80.0f) & (a <= 0x1p100f) & (a >= 0x1p-100f);  // false for NaN
    }
    if (fast) {
#pragma unroll
        for (int e = 0; e < N; ++e) v[e] = div_rn_fast(v[e], d[e]);
    } else {
#pragma unroll
        for (int e = 0; e < N; ++e) v[e] = __fdiv_rn(v[e], d[e]);
    }
}

// The activations as function objects (ActivationResidual::with_activation), and f on a row of
// values: elementwise, but SiLU's row at once (silu_row).
struct SiluFn {
    __device__ __forceinline__ float operator()(float v) const { return silu(v); }
};
template <class F, int N>
__device__ __forceinline__ void activate_row(const F &f, float (&v)[N]) {
#pragma unroll
    for (int e = 0; e < N; ++e) v[e] = f(v[e]);
}
template <int N>
__device__ __forceinline__ void activate_row(const SiluFn &, float (&v)[N]) {
    silu_row(v);
}

// out = (v * scale) + v,  v = acc + bias[col]   (bias absent: v = acc + -0.0 = acc)
//
// The seed's epilogue; ActivationResidual (below, what the kernels and the elementwise baseline,
// elementwise/epilogue.cuh, call) extends it with the other forms.
struct BiasScaleResidual {
    const float *bias;  // n values or nullptr
    float scale;

    // What operator() adds for one in-bounds output column: bias[col], or -0.0 without a bias.
    // -0.0 is the identity of IEEE addition (x + -0.0 == x for every x, +0.0 and -0.0
    // included; a NaN stays a NaN), so v needs no branch: a per-element `bias ? acc + b : acc`
    // cost a register copy and a predicated add per element in the sm90 epilogue's SASS.
    // Load once per column a thread owns.
    __device__ __forceinline__ float bias_at(int col) const { return bias ? __ldg(bias + col) : -0.0f; }

    // bias_value: bias_at(col) of the element's column.
    __device__ __forceinline__ float operator()(float acc, float bias_value) const {
        return scale_add(__fadd_rn(acc, bias_value), scale);
    }
};

// The kernels' functor: out = f(v) + beta * C[row][col], v = acc + bias[col] (GeEpilogue).
//
// One build serves every form: `activation` and `source` are uniform over the launch, so the
// branch on them costs no divergence. The kernels keep two store paths: the seed form without a
// source (is_seed()) applies operator() to the fragments in registers, unrolled, as it always
// has (on sm_90 plain Linear and ReLU without a source too: sm90/epilogue_store.cuh,
// LinearOrReluOp); every other form runs in a rolled loop (sm_90: over the store boxes, a lane's
// two rows of each in registers; mma.sync: over the tile staged in shared memory), so that the activations'
// code appears once per kernel rather than once per accumulator register.
struct ActivationResidual : BiasScaleResidual {
    const float *source;  // C or nullptr
    int64_t ldc;
    float beta;
    int activation;  // GE_ACTIVATION_*

    __host__ __device__ static ActivationResidual of(const GeEpilogue &e, const float *bias) {
        return {{bias, e.scale}, e.source, e.ldc, e.beta, e.activation};
    }
    __host__ __device__ static ActivationResidual from(const GeProblem &p) { return of(p.epilogue, p.bias); }

    // The register path: the seed's f and no C.
    __device__ __forceinline__ bool is_seed() const {
        return activation == GE_ACTIVATION_SCALE_ADD && source == nullptr;
    }

    // v of one element (bias_value: bias_at(col)).
    __device__ __forceinline__ float linear(float acc, float bias_value) const { return __fadd_rn(acc, bias_value); }

    __device__ __forceinline__ float activate(float v) const {
        switch (activation) {
            case GE_ACTIVATION_SCALE_ADD:
                return scale_add(v, scale);
            case GE_ACTIVATION_RELU:
                return relu(v);
            case GE_ACTIVATION_GELU:
                return gelu_erf(v);
            case GE_ACTIVATION_GELU_TANH:
                return gelu_tanh(v);
            case GE_ACTIVATION_SILU:
                return silu(v);
            default:  // GE_ACTIVATION_IDENTITY (the host passes nothing else)
                return v;
        }
    }

    // body(f) with f the launch's activation as a function object: one uniform branch, and
    // body's code instantiated once per activation, each inlined straight (the sm_90 epilogue's
    // sixteen values of a box, where a call per element would cost more than the activation).
    template <class Body>
    __device__ __forceinline__ void with_activation(Body &&body) const {
        switch (activation) {
            case GE_ACTIVATION_SCALE_ADD: {
                const float s = scale;
                body([s](float v) { return scale_add(v, s); });
                break;
            }
            case GE_ACTIVATION_RELU:
                body([](float v) { return relu(v); });
                break;
            case GE_ACTIVATION_GELU:
                body([](float v) { return gelu_erf(v); });
                break;
            case GE_ACTIVATION_GELU_TANH:
                body([](float v) { return gelu_tanh(v); });
                break;
            case GE_ACTIVATION_SILU:
                body(SiluFn{});
                break;
            default:  // GE_ACTIVATION_IDENTITY
                body([](float v) { return v; });
        }
    }

    // activate() as a call: for the paths whose accumulators are already dead (in shared
    // memory) when it runs, where one out-of-line copy of the activations keeps them out of the
    // kernel's body (the mma.sync kernels inline their epilogue at two sites, and nvcc's and
    // ptxas's time grows with it).
    __device__ __noinline__ float activate_call(float v) const { return activate(v); }

    // Address of C's element (row, col): read it only in bounds, and only where source != nullptr.
    __device__ __forceinline__ const float *source_at(int row, int col) const {
        return source + static_cast<int64_t>(row) * ldc + col;
    }

    // out of one element from its v and its C value (ignored without a source). The add is
    // torch.add(y, C, alpha=beta)'s: one fma (exactly y + C for beta == 1).
    __device__ __forceinline__ float finish(float v, float c) const { return add_source(activate(v), c); }

    // finish() for an in-bounds element whose C has not been read yet, through activate_call().
    // A plain load: C may be out, which this kernel writes (so never through the read-only path).
    __device__ __forceinline__ float finish_at(float v, int row, int col) const {
        return add_source(activate_call(v), source ? *source_at(row, col) : 0.0f);
    }

    __device__ __forceinline__ float add_source(float y, float c) const { return source ? add_c(y, c) : y; }

    // add_source() where the caller knows there is a source (one uniform test per row, not per element).
    __device__ __forceinline__ float add_c(float y, float c) const { return __fmaf_rn(beta, c, y); }
};

}  // namespace ge::epilogue
