// PTX of the TMA + wgmma family only (mbarrier, TMA, clusters, register reconfiguration, named
// barriers), one tiny named function per instruction; the wgmma wrappers are in wgmma.cuh, what
// both families use in ../common/ptx.cuh (smem_addr). Every sm_90-only asm body is compiled
// only for sm_90a (GE_SM90_ENABLED); on other targets the functions are empty, so the single
// translation unit that also builds sm_80 and compute_80 still compiles.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GE_SM90_ENABLED 1
#else
#define GE_SM90_ENABLED 0
#endif

namespace ge::sm90::ptx {

// ---- mbarrier (CTA scope) ---------------------------------------------------------------

__device__ __forceinline__ void mbarrier_init(uint64_t *bar, uint32_t arrive_count) {
#if GE_SM90_ENABLED
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ge::ptx::smem_addr(bar)), "r"(arrive_count)
                 : "memory");
#endif
}

// Makes the mbarrier inits visible to the async proxy (TMA) before anyone uses them.
__device__ __forceinline__ void fence_barrier_init() {
#if GE_SM90_ENABLED
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// One arrival plus `bytes` of expected transaction (the TMA loads then complete it).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
#if GE_SM90_ENABLED
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ge::ptx::smem_addr(bar)), "r"(bytes)
                 : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t *bar) {
#if GE_SM90_ENABLED
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ge::ptx::smem_addr(bar)) : "memory");
#endif
}

// Spins until the phase with parity `phase` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t *bar, uint32_t phase) {
#if GE_SM90_ENABLED
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(ge::ptx::smem_addr(bar)),
        "r"(phase)
        : "memory");
#endif
}

// ---- TMA ----------------------------------------------------------------------------------

__device__ __forceinline__ void prefetch_tensormap(const void *tmap) {
#if GE_SM90_ENABLED
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
#endif
}

// 2-D tiled bulk load of one box at coordinates (c0 = innermost, c1) into smem; completes
// its bytes on `bar`. Out-of-bounds parts of the box are zero-filled and still counted.
__device__ __forceinline__ void tma_load_2d(void *dst, const void *tmap, uint64_t *bar, int32_t c0, int32_t c1) {
#if GE_SM90_ENABLED
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(ge::ptx::smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(tmap)), "r"(ge::ptx::smem_addr(bar)), "r"(c0), "r"(c1)
        : "memory");
#endif
}

// Same, multicast: the box lands at the same smem offset in every CTA of `cta_mask` and
// completes its bytes on the mbarrier at the same offset in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(void *dst, const void *tmap, uint64_t *bar, int32_t c0,
                                                      int32_t c1, uint16_t cta_mask) {
#if GE_SM90_ENABLED
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(ge::ptx::smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(tmap)), "r"(ge::ptx::smem_addr(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
        : "memory");
#endif
}

// 2-D tiled bulk store of one box from smem (same layout rules as the load) to coordinates
// (c0 = innermost, c1); the hardware clips the parts of the box outside the tensor.
__device__ __forceinline__ void tma_store_2d(const void *tmap, const void *src, int32_t c0, int32_t c1) {
#if GE_SM90_ENABLED
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     reinterpret_cast<uint64_t>(tmap)),
                 "r"(ge::ptx::smem_addr(src)), "r"(c0), "r"(c1)
                 : "memory");
#endif
}

// Closes this thread's bulk-store group (the stores issued since the previous commit).
__device__ __forceinline__ void bulk_commit_group() {
#if GE_SM90_ENABLED
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

// Waits until at most N of this thread's bulk-store groups still read their smem source
// (their buffers may then be overwritten; the global writes may still be in flight).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
#if GE_SM90_ENABLED
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
#endif
}

// Waits until all of this thread's bulk-store groups are complete, global writes included.
__device__ __forceinline__ void bulk_wait_all() {
#if GE_SM90_ENABLED
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

// Makes this thread's generic-proxy smem writes visible to the async proxy (a TMA store that
// a later barrier lets another thread issue).
__device__ __forceinline__ void fence_proxy_async_smem() {
#if GE_SM90_ENABLED
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// ---- Clusters ------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t cluster_ctarank() {
    uint32_t rank = 0;
#if GE_SM90_ENABLED
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
    return rank;
}

// CTAs in this CTA's cluster (1 for a launch without clusters).
__device__ __forceinline__ uint32_t cluster_nctarank() {
    uint32_t n = 1;
#if GE_SM90_ENABLED
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
#endif
    return n;
}

// All threads of all CTAs of the cluster (release/acquire: barrier inits become visible).
__device__ __forceinline__ void cluster_sync() {
#if GE_SM90_ENABLED
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

// The 32-bit word at `addr`'s offset in the shared memory of CTA `cta_rank` of the cluster (own
// rank included). The caller orders it after the write (a cluster_sync between them).
__device__ __forceinline__ int32_t ld_shared_cluster_s32(const void *addr, uint32_t cta_rank) {
    int32_t value = 0;
#if GE_SM90_ENABLED
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %1, %2;\n"
        "ld.shared::cluster.s32 %0, [remote];\n"
        "}\n"
        : "=r"(value)
        : "r"(ge::ptx::smem_addr(addr)), "r"(cta_rank)
        : "memory");
#endif
    return value;
}

// Arrive on the mbarrier at `bar`'s offset in CTA `cta_rank` of the cluster (own rank included).
// Default .release.cta semantics (as CUTLASS's ClusterBarrier::arrive): a .release.cluster
// arrive would also wait for this warp's outstanding global stores and serialises the mainloop.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t *bar, uint32_t cta_rank) {
#if GE_SM90_ENABLED
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(ge::ptx::smem_addr(bar)),
        "r"(cta_rank)
        : "memory");
#endif
}

// ---- Register reconfiguration (whole warpgroup executes it) --------------------------------

template <uint32_t REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
#if GE_SM90_ENABLED
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
#endif
}

template <uint32_t REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
#if GE_SM90_ENABLED
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
#endif
}

// ---- Named barriers (ids 1..15; 0 is __syncthreads) -------------------------------------

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace ge::sm90::ptx
