// Raw PTX used by the mma.sync family (sm_80+), each wrapped in a tiny named function.
// Thread scope: nothing here reads threadIdx.
#pragma once

#include <cstdint>

namespace ge::ptx {

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
// this round_half_ulp_truncate). Three integer ops, no predicates (cvt.rna.tf32 compiles to a
// compare, a predicated add and predicate spills: measured 9 % slower in the mma.sync mainloop).
// The two max ops undo the add when it carried out of the magnitude (NaN payloads >= 0x7ffff000
// of either sign, such as CUDA's 0x7fffffff), so NaN stays NaN; as with truncation, only a NaN
// whose payload lies entirely in the 13 dropped bits reads as +-Inf.
__device__ __forceinline__ uint32_t add_half_ulp_tf32(uint32_t x) {
    uint32_t r;
    asm("{\n\t"
        ".reg .u32 t;\n\t"
        "add.u32 t, %1, 0x1000;\n\t"
        "max.s32 t, t, %1;\n\t"
        "max.u32 %0, t, %1;\n\t"
        "}"
        : "=r"(r)
        : "r"(x));
    return r;
}

// Shared-memory address as the 32-bit value that cp.async / ld.shared take.
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy that bypasses L1; copies 0 bytes and zero-fills when !valid.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}

// 4-byte global->shared copy; zero-fills when !valid.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most `Pending` committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
    static_assert(Pending >= 0 && Pending < 8, "cp.async.wait_group takes a small immediate");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Four 8x8 matrices of 16-byte rows from shared memory, one register each: lanes 8j..8j+7 give
// the row addresses of matrix j, and lane l receives word l%4 of row l/4 of every matrix. Typed
// .b16, but on 32-bit data each row is 4 words, so matrix j lands as a tf32 fragment register.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_row_addr));
}

// D = A(16x8, row) * B(8x8, col) + D, tf32 inputs, fp32 accumulators.
// Fragment ownership (g = lane/4, t = lane%4):
//   a = {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]},  b = {B[t][g], B[t+4][g]},
//   d = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- GPU-scope flags (stream-K partial-tile hand-off, csrc/common/stream_k.cuh) ----------

// Adds v to *flag with release semantics at GPU scope: writes this thread made, and (through a
// preceding barrier) those of the threads it synchronised with, are visible before the count.
__device__ __forceinline__ void red_release_add(int32_t *flag, int32_t v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(flag), "r"(v) : "memory");
}

// Reads *flag with acquire semantics at GPU scope.
__device__ __forceinline__ int32_t ld_acquire(const int32_t *flag) {
    int32_t v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    return v;
}

}  // namespace ge::ptx
