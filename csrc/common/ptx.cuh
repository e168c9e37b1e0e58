// PTX wrappers that more than one part of csrc/ needs, each a tiny named function; thread scope.
//   - TF32 rounding: the mma.sync operands (sm80/warp_mma.cuh) and the operand repack
//     (elementwise/repack_tf32.cuh);
//   - smem_addr: the 32-bit shared-memory address every family's PTX takes; ldmatrix, which
//     loads TF32 fragments in the m16n8k8 layout of mma.sync's and of wgmma's register A;
//   - GPU-scope release/acquire flag operations: the stream-K hand-off (stream_k.cuh).
// cp.async and mma.sync (sm80/ and skinny/) are in ptx_sm80.cuh; PTX that only one family uses
// lives in its folder (sm90/ptx.cuh). Family code calls these as ge::ptx::..., its own as ptx::....
#pragma once

#include <cstdint>

namespace ge::ptx {

// ---- TF32 rounding ---------------------------------------------------------------------

// fp32 -> tf32, round to nearest, ties away from zero (what cuBLAS's tf32 conversion does).
// The result keeps fp32's layout with the low 13 mantissa bits cleared.
__device__ __forceinline__ uint32_t cvt_rna_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// The same rounding, kept as a float (the low 13 mantissa bits cleared).
__device__ __forceinline__ float round_tf32(float x) { return __uint_as_float(cvt_rna_tf32(x)); }

// Round to nearest (ties away) for an operand the tensor core then truncates: mma reads only
// the top 19 bits of a .tf32 register, so adding half a TF32 ulp to the magnitude first turns
// that truncation into cvt_rna_tf32's rounding, for every finite value and +-Inf (CUTLASS calls
// this round_half_ulp_truncate). Three integer ops and no predicates, where cvt.rna.tf32 compiles
// to a compare, a predicated add and predicate spills that slow the mma.sync mainloop down
// (docs/BENCHMARKS.md). The two max ops undo the add when it carried out of the magnitude (NaN
// payloads >= 0x7ffff000 of either sign, such as CUDA's 0x7fffffff), so NaN stays NaN; as with
// truncation, only a NaN whose payload lies entirely in the 13 dropped bits reads as +-Inf.
__device__ __forceinline__ uint32_t add_half_ulp_tf32(uint32_t x) {
#if GE_MUTATION == 4
    // Mutation 4 (tests only, tools/mutation_run.sh): no half ulp added, so the operands the
    // kernels should round in registers are truncated.
    return x;
#endif
    uint32_t r;
    asm("{\n\t"
        ".reg .u32 t;\n\t"
#if GE_MUTATION == 5
        // Mutation 5 (tests only): one less than half an ulp, so exact ties round toward zero
        // instead of away (every other value still rounds to nearest).
        "add.u32 t, %1, 0x0fff;\n\t"
#else
        "add.u32 t, %1, 0x1000;\n\t"
#endif
        "max.s32 t, t, %1;\n\t"
        "max.u32 %0, t, %1;\n\t"
        "}"
        : "=r"(r)
        : "r"(x));
    return r;
}

// The 3xTF32 split (Precision::Tf32x3) of an fp32 operand, for tensor cores that truncate:
// `big` is x rounded to nearest, ties away, as an exact TF32 value (low 13 bits clear), and
// `small` the remainder x - big (exact in fp32: both lie within one TF32 ulp of x) with half a
// TF32 ulp added, so that the tensor core reads it rounded to nearest too. big + small carries
// 22 of fp32's 24 significand bits; the product small*small that 3xTF32 omits lies below fp32's
// resolution of big*big. Finite inputs only: for +-Inf the remainder is NaN (Inf - Inf), and a
// product with it makes the output NaN, as in any 3xTF32 GEMM.
__device__ __forceinline__ void split_tf32(uint32_t x, uint32_t &big, uint32_t &small) {
    big = add_half_ulp_tf32(x) & 0xffffe000u;
    small = add_half_ulp_tf32(__float_as_uint(__fsub_rn(__uint_as_float(x), __uint_as_float(big))));
}

// ---- Shared memory ---------------------------------------------------------------------

// Shared-memory address as the 32-bit value that cp.async, ldmatrix, mbarrier and TMA take.
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Lane 0's value in every lane of a converged warp. For a value that is already the same in
// every lane (a stage's address) this changes nothing but what ptxas can prove: from a shuffle of
// one lane it knows the value is warp-uniform and keeps it, and what is computed from it, in
// uniform registers.
__device__ __forceinline__ uint32_t warp_uniform(uint32_t v) { return __shfl_sync(0xffffffffu, v, 0); }

// This thread's lane, read where it is called: the compiler cannot move a volatile asm, so what
// is computed from it (a lane's swizzled shared-memory offsets) is recomputed there, a few
// integer ops, instead of being hoisted to the kernel's start and held in registers (or spilled)
// across every mainloop.
__device__ __forceinline__ int lane_id_here() {
    int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

// Four 8x8 matrices of 16-byte rows from shared memory, one register each: lanes 8j..8j+7 give
// the row addresses of matrix j, and lane l receives word l%4 of row l/4 of every matrix. Typed
// .b16, but on 32-bit data each row is 4 words, so matrix j lands as a tf32 fragment register.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_row_addr));
}

// ---- GPU-scope flags (stream-K partial-tile hand-off, stream_k.cuh) ----------------------

// Stores v to *word with release semantics at GPU scope: writes this thread made, and (through a
// preceding barrier) those of the threads it synchronised with, are visible before the word.
__device__ __forceinline__ void st_release(uint64_t *word, uint64_t v) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(word), "l"(v) : "memory");
}

// Reads *word with acquire semantics at GPU scope.
__device__ __forceinline__ uint64_t ld_acquire(const uint64_t *word) {
    uint64_t v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory");
    return v;
}

// Reads *word without ordering (an atomic read: it may race with other CTAs' atomics).
__device__ __forceinline__ uint64_t ld_relaxed(const uint64_t *word) {
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory");
    return v;
}

// Ask L2 for the 128-byte line holding `p` (a hint: nothing waits for it, no register is written).
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

}  // namespace ge::ptx
