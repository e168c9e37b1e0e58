// PTX of the sm_80 instructions (cp.async, mma.sync) that two families use: the mma.sync
// kernels (sm80/) and the skinny kernels (skinny/), each a tiny named function called as
// ge::ptx::.... Thread scope: nothing here reads threadIdx.
#pragma once

#include <cstdint>

namespace ge::ptx {

// ---- cp.async ----------------------------------------------------------------------------

// 16-byte global->shared copy that bypasses L1; copies 0 bytes and zero-fills when !valid.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

// 8-byte global->shared copy (both addresses 8-byte aligned).
__device__ __forceinline__ void cp_async_8(uint32_t dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(src));
}

// 4-byte global->shared copy; zero-fills when !valid.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most `PENDING` committed groups are still in flight. A compiler memory barrier
// too, so that no read of what the copies wrote is moved above it (a caller may read its own
// copies without a __syncthreads after).
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    static_assert(PENDING >= 0 && PENDING < 8, "cp.async.wait_group takes a small immediate");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// ---- mma.sync -------------------------------------------------------------------

// D = A(16x8, row) * B(8x8, col) + D, tf32 inputs, fp32 accumulators.
// Fragment ownership (g = lane/4, t = lane%4):
//   a = {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]},  b = {B[t][g], B[t+4][g]},
//   d = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace ge::ptx
