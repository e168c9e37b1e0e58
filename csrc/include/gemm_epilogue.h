/*
 * gemm_epilogue.h — the one definition of everything that crosses the host/kernel boundary.
 *
 * Plain C (no C++), so that nvcc compiles it into the kernels and bindgen turns it into
 * src/sys/bindings.rs for the Rust side. Never copy a struct from here by hand: edit this
 * file, then regenerate with `cargo build --features regen-bindings`.
 *
 * Computed by every kernel (row-major, leading dimensions in elements):
 *     v[m][n]   = sum_k X[m][k] * W[n][k] + bias[n]     (bias == NULL: v = acc)
 *     out[m][n] = (v * scale) + v                       (two roundings, never an FMA)
 */
#ifndef GEMM_EPILOGUE_H
#define GEMM_EPILOGUE_H

#include <stdint.h>

/* ---- The problem, as every kernel family sees it ------------------------------------- */

/* One fused Linear + epilogue call. Shapes are validated on the host before any launch:
 * m, n >= 1, k >= 0, each <= 2^31 - 1024 (so tile round-ups stay in int32); ld* >= the row
 * width; every row lies inside its buffer. */
typedef struct GeProblem {
    const float *x;    /* X: m x k, row stride ldx                                    */
    const float *w;    /* W: n x k, row stride ldw (nn.Linear's weight layout)        */
    const float *bias; /* bias: n values, or NULL for "no bias"                       */
    float *out;        /* out: m x n, row stride ldo; written once, never read        */
    int64_t ldx;
    int64_t ldw;
    int64_t ldo;
    int32_t m;
    int32_t n;
    int32_t k;
    float scale;       /* s in (v*s) + v; any value, NaN and Inf included             */
} GeProblem;

/* Second pass of the unfused baseline (cuBLAS GEMM, then this): in place on `out`,
 * out = ((out + bias) * scale) + (out + bias). Same rounding as the fused epilogue. */
typedef struct GeElementwiseParams {
    float *out;
    const float *bias; /* NULL: no bias */
    int64_t ldo;
    int32_t m;
    int32_t n;
    float scale;
} GeElementwiseParams;

/* Operand repack, for operands whose rows are not 16-byte aligned (k % 4 != 0, a misaligned
 * base, or ld % 4 != 0): copies rows x cols at stride ld_src into dst at stride ld_dst (a
 * multiple of 4, dst 16-byte aligned), zero-fills columns cols..ld_dst, and rounds every value to
 * TF32 (nearest, ties away) on the way, so the TMA/vec4 kernels can then read it. Block (256,1,1),
 * grid (quads of a row, rows in flight); each thread writes 16 bytes at a time. */
typedef struct GeRepackParams {
    const float *src;
    float *dst;
    int64_t ld_src;
    int64_t ld_dst;
    int32_t rows;
    int32_t cols;
} GeRepackParams;

/* ---- Stream-K (csrc/common/stream_k.cuh): both families ----------------------------- */

/* The last `tiles` tiles of a launch are shared along K by G CTAs (the host uses it as split-K:
 * all tiles, when there are fewer tiles than fit on the device at once; or for the partial last
 * wave of a large problem). tiles == 0: none, every CTA computes whole tiles (both pointers may be NULL).
 *   partials: G x TILE_M*TILE_N fp32, one partial tile per stream-K CTA;
 *   flags:    tiles + 1 int32, zero at launch: one arrival counter per stream-K tile, then (mma.sync
 *             family) the ticket counter that numbers the CTAs in the order they start.
 * For the sm_90 cluster and cooperative kernels a "CTA" and a "tile" here are a cluster and a
 * cluster tile, and both arrays are larger (see GeSm90Params). Which G CTAs, and the rest of the
 * launch contract, is per family (below). */
typedef struct GeStreamK {
    float *partials;
    int32_t *flags;
    int32_t tiles;
} GeStreamK;

/* ---- mma.sync family (sm_80+): csrc/sm80/ -------------------------------------------- */
/* Kernel parameters: `const GeProblem`, `const GeStreamK`, by value. Grid: 1-D, one CTA per
 * output tile, ceil(m/TILE_M) * ceil(n/TILE_N) CTAs, rasterised in the kernel; with stream-K,
 * (num_tiles - stream_k.tiles) CTAs for the whole tiles plus G more that share the rest: every
 * CTA takes a ticket when it starts, and the first num_tiles - stream_k.tiles tickets compute
 * whole tiles (so a stream-K CTA only ever waits for CTAs that started before it: no deadlock
 * whatever the grid). Dynamic shared memory: STAGES * (TILE_M + TILE_N) * TILE_K * sizeof(float)
 * bytes.
 * Each configuration exists twice: `_vec4` (16-byte cp.async; needs k % 4 == 0, x and w
 * 16-byte aligned, ldx and ldw multiples of 4) and `_scalar` (4-byte cp.async, any shape).
 * Operands are rounded to TF32 (nearest, ties away) in registers, except in the `_vec4_trunc`
 * kernels of the large and wide tiles, which pass fp32 bits and let the tensor core truncate. */

/* "large": 128x128x32 CTA tile, 4 warps of 64x64, 3 stages (96 KiB; fits sm_86/89 too) */
#define GE_SM80_LARGE_TILE_M 128
#define GE_SM80_LARGE_TILE_N 128
#define GE_SM80_LARGE_TILE_K 32
#define GE_SM80_LARGE_STAGES 3
#define GE_SM80_LARGE_THREADS 128

/* "wide": 128x256x32 CTA tile, 8 warps of 64x64, 3 stages (144 KiB: sm_80 and sm_90 only) */
#define GE_SM80_WIDE_TILE_M 128
#define GE_SM80_WIDE_TILE_N 256
#define GE_SM80_WIDE_TILE_K 32
#define GE_SM80_WIDE_STAGES 3
#define GE_SM80_WIDE_THREADS 256

/* "small": 64x64x32 CTA tile, 4 warps of 32x32, 4 stages (64 KiB): small m or n */
#define GE_SM80_SMALL_TILE_M 64
#define GE_SM80_SMALL_TILE_N 64
#define GE_SM80_SMALL_TILE_K 32
#define GE_SM80_SMALL_STAGES 4
#define GE_SM80_SMALL_THREADS 128

/* ---- TMA + wgmma family (sm_90a only): csrc/sm90/ ------------------------------------ */

/* A CUtensorMap, opaque: 128 bytes, 64-byte aligned (cuda.h's layout), filled on the host
 * by cuTensorMapEncodeTiled and read by the kernel from parameter space. */
typedef struct __attribute__((aligned(64))) GeTensorMap {
    uint64_t opaque[16];
} GeTensorMap;

/* Kernel parameter: `const __grid_constant__ GeSm90Params` by value. */
typedef struct GeSm90Params {
    GeTensorMap x_map; /* X as a 2-D tensor {k, m} (k innermost), box {TILE_K, x_box_rows}, 128B swizzle */
    GeTensorMap w_map; /* W as a 2-D tensor {k, n} (k innermost), box {TILE_K, TILE_N}, 128B swizzle */
    /* out as a 2-D tensor {n, m} (n innermost), box {GE_SM90_STORE_BOX_COLS, rows of one
     * consumer's tile}, 128B swizzle: the epilogue's TMA stores. Encoded (and store_tma = 1) only
     * when out is 16-byte aligned and n % 4 == 0 and ldo % 4 == 0 (TMA clips a box at n only to
     * 16 bytes); else store_tma = 0, the map is unused and the epilogue stores from registers. */
    GeTensorMap out_map;
    GeProblem problem; /* pointers for the epilogue (bias, out) and the shape */
    /* Stream-K, every sm_90 kernel: the persistent grid is G clusters (G CTAs without a
     * cluster), every cluster shares the stream-K cluster tiles after its whole ones. Requires
     * (cluster tiles - stream_k.tiles) % G == 0 and every cluster resident; the ticket counter is
     * unused. Sizes: partials G x CLUSTER_M*TILE_M*TILE_N floats (a cluster's slot; a consumer
     * warpgroup's part of CTA rank r, rows row0.. of its tile, at (r*TILE_M + row0)*TILE_N),
     * flags tiles*CLUSTER_M*PARTS + 1 int32 (one counter per (cluster tile, rank, part); PARTS =
     * consumers sharing a tile: 1 ping-pong, 2 cooperative). */
    GeStreamK stream_k;
    int32_t store_tma; /* 1: store through out_map; 0: direct stores (any ldo, any alignment) */
    /* Rows of X per TMA box (x_map's box): TILE_M, or m rounded up to a multiple of 8 when m < TILE_M.
     * The stage's rows past the box keep stale data: they only feed output rows past m, which are
     * never stored, and TMA moves no zero-filled rows that cannot be used. */
    int32_t x_box_rows;
} GeSm90Params;

/* The epilogue of every sm_90 kernel stages its results in shared memory, GE_SM90_STORE_BOX_COLS
 * columns (one 128-byte swizzle row) at a time, in GE_SM90_EPILOGUE_SMEM_BYTES of buffers (half
 * per consumer warpgroup), and TMA-stores each box. */
#define GE_SM90_STORE_BOX_COLS 32
#define GE_SM90_EPILOGUE_SMEM_BYTES 32768

/* "pingpong": warp-specialized persistent kernel, 1 producer + 2 consumer warpgroups, each
 * consumer owning a 128x128 tile (alternating), 32-float K stages in a STAGES-deep TMA ring.
 * Entry: ge_sm90_tf32_128x128x32_s6_pingpong. Grid: min(num_tiles, num_SMs) CTAs, 1-D, no
 * cluster; num_tiles = ceil(m/TILE_M) * ceil(n/TILE_N). Dynamic smem: SMEM_BYTES (the stages,
 * the epilogue buffers, the mbarriers and 1024 bytes of alignment slack). Tensor map boxes:
 * {TILE_K, x_box_rows} for X (TILE_M rows, fewer when m < TILE_M: GeSm90Params), {TILE_K,
 * TILE_N} for W, {STORE_BOX_COLS, TILE_M} for out. */
#define GE_SM90_PINGPONG_TILE_M 128
#define GE_SM90_PINGPONG_TILE_N 128
#define GE_SM90_PINGPONG_TILE_K 32
#define GE_SM90_PINGPONG_STAGES 6
#define GE_SM90_PINGPONG_THREADS 384
#define GE_SM90_PINGPONG_SMEM_BYTES                                                                     \
    (GE_SM90_PINGPONG_STAGES * (GE_SM90_PINGPONG_TILE_M + GE_SM90_PINGPONG_TILE_N) * GE_SM90_PINGPONG_TILE_K * 4 + \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* "pingpong, 64 rows": the ping-pong kernel with 64x128 tiles (one m64n128k8 per k-step) and
 * 8 stages: for small M. Half the rows of the 128-row tile per consumer, so twice the tiles: a
 * problem of M <= 256 splits along K into half as many parts per tile, and each stream-K finisher
 * adds half as many (and half-size) partial tiles. Entry: ge_sm90_tf32_64x128x32_s8_pingpong.
 * Grid, launch and tensor maps as for "pingpong" with these tiles; SMEM_BYTES equals
 * GE_SM90_PINGPONG_SMEM_BYTES (8 stages x 24 KiB = 6 x 32 KiB). */
#define GE_SM90_PINGPONG64_TILE_M 64
#define GE_SM90_PINGPONG64_TILE_N 128
#define GE_SM90_PINGPONG64_TILE_K 32
#define GE_SM90_PINGPONG64_STAGES 8
#define GE_SM90_PINGPONG64_THREADS 384
#define GE_SM90_PINGPONG64_SMEM_BYTES                                                                           \
    (GE_SM90_PINGPONG64_STAGES * (GE_SM90_PINGPONG64_TILE_M + GE_SM90_PINGPONG64_TILE_N) * GE_SM90_PINGPONG64_TILE_K * 4 + \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* "pingpong, 64x64": the ping-pong kernel with 64x64 tiles (one m64n64k8 per k-step) and 12
 * stages: for M <= 128, where a wave of these tiles needs no split (or half as many parts as the
 * 64x128 tiles) and each CTA streams its own 64 rows of W, as cuBLAS's 64x64 kernel does there.
 * Entry: ge_sm90_tf32_64x64x32_s12_pingpong. Grid, launch and tensor maps as for "pingpong"
 * with these tiles; SMEM_BYTES equals GE_SM90_PINGPONG_SMEM_BYTES (12 x 16 KiB = 6 x 32 KiB). */
#define GE_SM90_PINGPONG64X64_TILE_M 64
#define GE_SM90_PINGPONG64X64_TILE_N 64
#define GE_SM90_PINGPONG64X64_TILE_K 32
#define GE_SM90_PINGPONG64X64_STAGES 12
#define GE_SM90_PINGPONG64X64_THREADS 384
#define GE_SM90_PINGPONG64X64_SMEM_BYTES                                                                          \
    (GE_SM90_PINGPONG64X64_STAGES * (GE_SM90_PINGPONG64X64_TILE_M + GE_SM90_PINGPONG64X64_TILE_N) *              \
         GE_SM90_PINGPONG64X64_TILE_K * 4 +                                                                        \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* "pingpong, cluster of 2": the same kernel (tiles, stages, threads, SMEM_BYTES as above) with
 * the CTAs paired into clusters of CLUSTER_M = 2 along M. The two CTAs of a cluster compute
 * vertically adjacent TILE_M x TILE_N tiles (one (CLUSTER_M*TILE_M) x TILE_N "cluster tile")
 * that share the same W tile: CTA rank r TMA-loads rows r*W_BOX_ROWS.. of it (a {TILE_K,
 * W_BOX_ROWS} box) and multicasts the slice into both CTAs.
 * Entry: ge_sm90_tf32_128x128x32_s6_pingpong_c2. Launch contract (cuLaunchKernelEx):
 *   - attribute CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = (CLUSTER_M, 1, 1), always (the entry
 *     has no __cluster_dims__; without the attribute it would multicast to a CTA that is not
 *     there);
 *   - grid: CLUSTER_M * min(cluster_tiles, max active clusters) CTAs, 1-D, a multiple of
 *     CLUSTER_M; cluster_tiles = ceil(m / (CLUSTER_M*TILE_M)) * ceil(n / TILE_N); the max active
 *     clusters from cuOccupancyMaxActiveClusters with this block, smem and cluster shape (the
 *     clusters are persistent: the grid is what is resident at once, not one wave more);
 *   - block GE_SM90_PINGPONG_THREADS, dynamic smem GE_SM90_PINGPONG_SMEM_BYTES;
 *   - tensor map boxes: {TILE_K, x_box_rows} for X (as above), {TILE_K, W_BOX_ROWS} for W.
 * Rows of the second CTA past m (m <= 128, or m % 256 in 1..128) are zero-filled by TMA and not
 * stored; that CTA still loads and multicasts its W slice. */
#define GE_SM90_PINGPONG_CLUSTER_M 2
#define GE_SM90_PINGPONG_C2_W_BOX_ROWS (GE_SM90_PINGPONG_TILE_N / GE_SM90_PINGPONG_CLUSTER_M)

/* "cooperative": the same warp roles, but both consumers work on every tile, each on TILE_M / 2
 * rows of it (m64n256k8 wgmmas: fewer shared-memory bytes per FLOP than the ping-pong's
 * m64n128k8), 128x256x32 tiles, 4 stages. Entry: ge_sm90_tf32_128x256x32_s4_cooperative. Grid,
 * launch and smem as for "pingpong"; num_tiles = ceil(m/TILE_M) * ceil(n/TILE_N) with these
 * tiles. Tensor map boxes: {TILE_K, x_box_rows} for X, {TILE_K, TILE_N} for W, {STORE_BOX_COLS,
 * TILE_M / 2} for out. */
#define GE_SM90_COOP_TILE_M 128
#define GE_SM90_COOP_TILE_N 256
#define GE_SM90_COOP_TILE_K 32
#define GE_SM90_COOP_STAGES 4
#define GE_SM90_COOP_THREADS 384
#define GE_SM90_COOP_SMEM_BYTES                                                                              \
    (GE_SM90_COOP_STAGES * (GE_SM90_COOP_TILE_M + GE_SM90_COOP_TILE_N) * GE_SM90_COOP_TILE_K * 4 + \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* "cooperative, cluster of 2": the cooperative kernel (tiles, stages, threads, SMEM_BYTES as
 * above) with its CTAs paired along M exactly as "pingpong, cluster of 2" pairs them: CTA rank r
 * loads rows r*W_BOX_ROWS.. of the shared 256-row W tile and multicasts them into both CTAs, so
 * each CTA reads 128 + 128 rows from L2 per k-block instead of 128 + 256.
 * Entry: ge_sm90_tf32_128x256x32_s4_cooperative_c2. Launch contract: that of "pingpong, cluster
 * of 2" with this kernel's tiles (cluster tile 256 x 256), and out boxes {STORE_BOX_COLS,
 * TILE_M / 2} as for "cooperative". Block and smem equal the ping-pong's, so one
 * cuOccupancyMaxActiveClusters answer serves both cluster kernels. */
#define GE_SM90_COOP_CLUSTER_M 2
#define GE_SM90_COOP_C2_W_BOX_ROWS (GE_SM90_COOP_TILE_N / GE_SM90_COOP_CLUSTER_M)

#endif /* GEMM_EPILOGUE_H */
