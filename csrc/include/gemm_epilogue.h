/*
 * gemm_epilogue.h — the one definition of everything that crosses the host/kernel boundary.
 *
 * Plain C (no C++), so that nvcc compiles it into the kernels and bindgen turns it into
 * src/sys/bindings.rs for the Rust side. Never copy a struct from here by hand: edit this
 * file, then regenerate with `cargo build --features regen-bindings`.
 *
 * Computed by every kernel (row-major, leading dimensions in elements):
 *     v[m][n]   = sum_k X[m][k] * W[n][k] + bias[n]     (bias == NULL: v = acc)
 *     out[m][n] = f(v) + beta * C[m][n]                 (GeEpilogue: f, and C if any)
 * the default f being the seed's (v * scale) + v (two roundings, never an FMA).
 */
#ifndef GEMM_EPILOGUE_H
#define GEMM_EPILOGUE_H

#include <stdint.h>

/* ---- The problem, as every kernel family sees it ------------------------------------- */

/* ---- The epilogue: what every kernel applies to v before its one store --------------- */

/* GeEpilogue.activation: f(v), each rounded as PyTorch's CUDA kernel for the expression rounds
 * (docs/EPILOGUE.md has the exact operations and where an FMA is or is not contracted). */
#define GE_ACTIVATION_SCALE_ADD 0 /* (v * scale) + v: the seed's `y * s + y.clone()` (default)  */
#define GE_ACTIVATION_IDENTITY 1  /* v: `F.linear(x, w, b)`                                      */
#define GE_ACTIVATION_RELU 2      /* `torch.relu(v)`: NaN stays NaN                               */
#define GE_ACTIVATION_GELU 3      /* `F.gelu(v)` (approximate="none": erf)                        */
#define GE_ACTIVATION_GELU_TANH 4 /* `F.gelu(v, approximate="tanh")`                              */
#define GE_ACTIVATION_SILU 5      /* `F.silu(v)`                                                  */

/* f, and the residual source C: out = f(v) + beta * C (`torch.add(f(v), C, alpha=beta)`: one
 * fma, as PyTorch's add rounds it). C is m x n at row stride ldc, read once per element by the
 * thread that then writes that element of out, so C may be out itself (ldc == ldo: an in-place
 * residual update); the host refuses any other overlap of C with out. */
typedef struct GeEpilogue {
    const float *source; /* C, or NULL: no residual (out = f(v))                         */
    int64_t ldc;
    float scale;        /* GE_ACTIVATION_SCALE_ADD's s; any value, NaN and Inf included          */
    float beta;         /* C's factor                                                            */
    int32_t activation; /* GE_ACTIVATION_*                                               */
} GeEpilogue;

/* One fused Linear + epilogue call. Shapes are validated on the host before any launch:
 * m, n >= 1, k >= 0, each <= 2^31 - 1024 (so tile round-ups stay in int32); ld* >= the row
 * width; every row lies inside its buffer. */
typedef struct GeProblem {
    const float *x;    /* X: m x k, row stride ldx                                    */
    const float *w;    /* W: n x k, row stride ldw (nn.Linear's weight layout)        */
    const float *bias; /* bias: n values, or NULL for "no bias"                       */
    float *out;        /* out: m x n, row stride ldo; written once, read only as C    */
    int64_t ldx;
    int64_t ldw;
    int64_t ldo;
    GeEpilogue epilogue;
    int32_t m;
    int32_t n;
    int32_t k;
} GeProblem;

/* Second pass of the unfused baseline (a GEMM wrote acc into `out`, then this kernel,
 * ge_elementwise_epilogue): in place on `out`, m x n at row stride ldo,
 *     out = f(out + bias) + beta * C          (f, beta and C from `epilogue`, as in GeProblem)
 * with the fused kernels' functor, so for the same v = acc + bias the rounding is theirs (bitwise
 * PyTorch's expression). C is read by the thread that then writes that element of out, so C may be
 * out itself (ldc == ldo: then C is the acc the pass reads); no other overlap of C with out. */
typedef struct GeElementwiseParams {
    float *out;
    const float *bias; /* NULL: no bias */
    int64_t ldo;
    GeEpilogue epilogue;
    int32_t m;
    int32_t n;
} GeElementwiseParams;

/* Operand repack, for operands whose rows are not 16-byte aligned (k % 4 != 0, a misaligned
 * base, or ld % 4 != 0): copies rows x cols at stride ld_src into dst at stride ld_dst (a
 * multiple of 4, dst 16-byte aligned), zero-fills columns cols..ld_dst, and converts every value
 * as `mode` says (GE_REPACK_*: copied, rounded to TF32, or split into 3xTF32 parts) on the way, so
 * the TMA/vec4 kernels can then read it. Also what rounds or splits W for the sm_90 kernels that
 * read it so, and prepares weights (the host's FusedGemm::prepare_weight: GE_REPACK_COPY for a
 * truncating handle). Block (256,1,1),
 * grid (quads of a row, rows in flight); each thread writes 16 bytes at a time. */
typedef struct GeRepackParams {
    const float *src;
    float *dst;
    int64_t ld_src;
    int64_t ld_dst;
    int32_t rows;
    int32_t cols;
    int32_t mode; /* GE_REPACK_COPY, GE_REPACK_ROUND or GE_REPACK_SPLIT */
    /* GE_REPACK_SPLIT: elements from a row's big parts in dst to its small parts (rows * ld_dst:
     * the small parts of all rows follow the big parts of all rows); unused otherwise. */
    int64_t small_offset;
} GeRepackParams;

/* GeRepackParams.mode: what the repack writes for each value a. */
#define GE_REPACK_COPY 0  /* a's bits (the kernel converts, or truncates) */
#define GE_REPACK_ROUND 1 /* tf32_rn(a): TF32, to nearest, ties away */
#define GE_REPACK_SPLIT 2 /* 3xTF32: big = tf32_rn(a) at dst, small = tf32_rn(a - big) at dst + small_offset */

/* ---- Stream-K (csrc/common/stream_k.cuh): both families ----------------------------- */

/* The last `tiles` tiles of a launch are shared along K by G CTAs (the host uses it as split-K:
 * all tiles, when there are fewer tiles than fit on the device at once; or for the partial last
 * wave of a large problem). tiles == 0: none, every CTA computes whole tiles (the pointers may
 * be NULL).
 *   partials: G x TILE_M*TILE_N fp32, one partial tile per stream-K CTA;
 *   ready:    G uint64 (G x CLUSTER_M*PARTS for the sm_90 kernels, below), one per partial
 *             slot: a CTA sets its slot's word to `launch` once its partial is stored, and a
 *             finisher waits until each contributor's word says so;
 *   ticket:   1 uint64, (launch << GE_STREAM_K_TICKET_BITS) | tickets taken: numbers the CTAs
 *             (sm_90: clusters) in the order they start. The first CTA of a launch finds an
 *             earlier launch's number (or anything) there and claims ticket 0 by writing its
 *             own; the others count on from it.
 *   launch:   this launch's number, 1 .. 2^GE_STREAM_K_LAUNCH_BITS - 1, never reused by the
 *             process (it starts at a random point and would wrap after 2^40 launches).
 * No word has to hold anything in particular at launch: the workspace needs no zeroing, and
 * whatever an earlier call (or the caller) left in it cannot be taken for this launch's. A
 * launch clears the words it used before it ends (a finisher its contributors' ready words,
 * the last ticket the ticket word), so a CUDA graph may replay it with the same number.
 * All three arrays are 8-byte aligned. For the sm_90 cluster and cooperative kernels a "CTA"
 * and a "tile" here are a cluster and a cluster tile, and the arrays are larger (see
 * GeSm90Params). Which G CTAs, and the rest of the launch contract, is per family (below). */
#define GE_STREAM_K_TICKET_BITS 24
#define GE_STREAM_K_LAUNCH_BITS 40
typedef struct GeStreamK {
    float *partials;
    uint64_t *ready;
    uint64_t *ticket;
    uint64_t launch;
    int32_t tiles;
} GeStreamK;

/* ---- mma.sync family (sm_80+): csrc/sm80/ -------------------------------------------- */
/* Kernel parameters: `const GeProblem`, `const GeStreamK`, by value. Grid: 1-D, one CTA per
 * output tile, ceil(m/TILE_M) * ceil(n/TILE_N) CTAs, rasterised in the kernel; with stream-K,
 * (num_tiles - stream_k.tiles) CTAs for the whole tiles plus G more that share the rest: every
 * CTA takes a ticket when it starts, and the first num_tiles - stream_k.tiles tickets compute
 * whole tiles (so a stream-K CTA only ever waits for CTAs that started before it: no deadlock
 * whatever the grid). Block: THREADS, one warp per WARP_M x WARP_N warp tile. Dynamic shared
 * memory: SMEM_BYTES = STAGES * (TILE_M + TILE_N) * TILE_K * sizeof(float).
 * Entries: ge_sm80_mma_<TILE_M>x<TILE_N>x<TILE_K>_s<STAGES>_<access>, each configuration as
 * `_vec4` (16-byte cp.async; needs k % 4 == 0, x and w 16-byte aligned, ldx and ldw multiples
 * of 4) and `_scalar` (4-byte cp.async, any shape). Operands are rounded to TF32 (nearest, ties
 * away) in registers, except in the `_vec4_trunc` entries of the 128x128 and 128x256 tiles,
 * which pass fp32 bits and let the tensor core truncate, and the `_x3` entries of the 64x64 tile
 * (Tf32x3), which split both operands into big and small TF32 parts in registers and issue
 * three mma.sync per product (small*big, big*small, big*big). */

/* 128x128: 4 warps of 64x64, 3 stages (96 KiB; fits sm_86/89 too).
 * Entries: ge_sm80_mma_128x128x32_s3_vec4, _vec4_trunc, _scalar. */
#define GE_SM80_MMA_128X128_TILE_M 128
#define GE_SM80_MMA_128X128_TILE_N 128
#define GE_SM80_MMA_128X128_TILE_K 32
#define GE_SM80_MMA_128X128_WARP_M 64
#define GE_SM80_MMA_128X128_WARP_N 64
#define GE_SM80_MMA_128X128_STAGES 3
#define GE_SM80_MMA_128X128_THREADS 128
#define GE_SM80_MMA_128X128_SMEM_BYTES                                                        \
    (GE_SM80_MMA_128X128_STAGES * (GE_SM80_MMA_128X128_TILE_M + GE_SM80_MMA_128X128_TILE_N) * \
     GE_SM80_MMA_128X128_TILE_K * 4)

/* 128x256: 8 warps of 64x64, 3 stages (144 KiB: sm_80 and sm_90 only).
 * Entries: ge_sm80_mma_128x256x32_s3_vec4, _vec4_trunc, _scalar. */
#define GE_SM80_MMA_128X256_TILE_M 128
#define GE_SM80_MMA_128X256_TILE_N 256
#define GE_SM80_MMA_128X256_TILE_K 32
#define GE_SM80_MMA_128X256_WARP_M 64
#define GE_SM80_MMA_128X256_WARP_N 64
#define GE_SM80_MMA_128X256_STAGES 3
#define GE_SM80_MMA_128X256_THREADS 256
#define GE_SM80_MMA_128X256_SMEM_BYTES                                                        \
    (GE_SM80_MMA_128X256_STAGES * (GE_SM80_MMA_128X256_TILE_M + GE_SM80_MMA_128X256_TILE_N) * \
     GE_SM80_MMA_128X256_TILE_K * 4)

/* 64x64: 4 warps of 32x32, 4 stages (64 KiB): small m or n.
 * Entries: ge_sm80_mma_64x64x32_s4_vec4, _scalar, _vec4_x3, _scalar_x3. */
#define GE_SM80_MMA_64X64_TILE_M 64
#define GE_SM80_MMA_64X64_TILE_N 64
#define GE_SM80_MMA_64X64_TILE_K 32
#define GE_SM80_MMA_64X64_WARP_M 32
#define GE_SM80_MMA_64X64_WARP_N 32
#define GE_SM80_MMA_64X64_STAGES 4
#define GE_SM80_MMA_64X64_THREADS 128
#define GE_SM80_MMA_64X64_SMEM_BYTES \
    (GE_SM80_MMA_64X64_STAGES * (GE_SM80_MMA_64X64_TILE_M + GE_SM80_MMA_64X64_TILE_N) * GE_SM80_MMA_64X64_TILE_K * 4)

/* ---- TMA + wgmma family (sm_90a only): csrc/sm90/ ------------------------------------ */

/* A CUtensorMap, opaque: 128 bytes, 64-byte aligned (cuda.h's layout), filled on the host
 * by cuTensorMapEncodeTiled and read by the kernel from parameter space. */
typedef struct __attribute__((aligned(64))) GeTensorMap {
    uint64_t opaque[16];
} GeTensorMap;

/* Kernel parameter: `const __grid_constant__ GeSm90Params` by value. */
typedef struct GeSm90Params {
    GeTensorMap x_map; /* X as a 2-D tensor {k, m} (k innermost), box {TILE_K, x_box_rows}, 128B swizzle */
    GeTensorMap w_map; /* W as a 2-D tensor {k, n} (k innermost), box {TILE_K, W box rows}, 128B swizzle */
    /* The Tf32x3 entries (`_x3`): W's small parts (GE_REPACK_SPLIT), the same geometry as w_map,
     * whose W is then the big parts. Unused by the other entries. */
    GeTensorMap w_small_map;
    /* out as a 2-D tensor {n, m} (n innermost), box {GE_SM90_STORE_BOX_COLS,
     * GE_SM90_STORE_BOX_ROWS}, 128B swizzle: the epilogue's TMA stores. Encoded (and store_tma = 1) only
     * when out is 16-byte aligned and n % 4 == 0 and ldo % 4 == 0 (TMA clips a box at n only to
     * 16 bytes); else store_tma = 0, the map is unused and the epilogue stores from registers. */
    GeTensorMap out_map;
    GeProblem problem; /* pointers for the epilogue (bias, out) and the shape */
    /* Stream-K, every sm_90 kernel: the persistent grid is G clusters (G CTAs without a
     * cluster), every cluster shares the stream-K cluster tiles after its whole ones. Requires
     * (cluster tiles - stream_k.tiles) % G == 0; with stream-K, clusters are numbered by the
     * ticket each takes as it starts (not blockIdx), so a finisher only waits for clusters that
     * started. Sizes: partials G x CLUSTER_M*TILE_M*TILE_N floats (a cluster's slot; a consumer
     * warpgroup's part of CTA rank r, rows row0.. of its tile, at (r*TILE_M + row0)*TILE_N),
     * ready G*CLUSTER_M*PARTS words (one per (cluster, rank, part): cluster c's rank r, part p
     * at (c*CLUSTER_M + r)*PARTS + p; PARTS = consumers sharing a tile: 1 ping-pong, 2
     * cooperative). */
    GeStreamK stream_k;
    int32_t store_tma; /* 1: store through out_map; 0: direct stores (any ldo, any alignment) */
    /* Rows of X per TMA box (x_map's box): TILE_M, or m rounded up to a multiple of 8 when m < TILE_M.
     * The stage's rows past the box keep stale data: they only feed output rows past m, which are
     * never stored, and TMA moves no zero-filled rows that cannot be used. */
    int32_t x_box_rows;
} GeSm90Params;

/* The epilogue of every sm_90 kernel stages its results in shared memory and TMA-stores them,
 * each warp on its own: boxes of GE_SM90_STORE_BOX_ROWS rows (a warp's 16 rows of a 64-row
 * wgmma atom) by GE_SM90_STORE_BOX_COLS columns (one 128-byte swizzle row), in
 * GE_SM90_EPILOGUE_SMEM_BYTES of buffers (half per consumer warpgroup, a quarter of that per
 * warp). */
#define GE_SM90_STORE_BOX_COLS 32
#define GE_SM90_STORE_BOX_ROWS 16
#define GE_SM90_EPILOGUE_SMEM_BYTES 32768

/* Every sm_90 kernel is warp-specialized and persistent: one producer warpgroup TMA-loads
 * TILE_K = 32-float K stages of X and W into a STAGES-deep ring, two consumer warpgroups issue
 * the wgmmas and the epilogue; THREADS = 384. Schedules:
 *   pingpong     each consumer owns whole TILE_M x TILE_N tiles, alternating with the other, so
 *                one consumer's epilogue overlaps the other's mainloop;
 *   cooperative  both consumers work on every tile, TILE_M / 2 rows each.
 * Entries: ge_sm90_<schedule>_<TILE_M>x<TILE_N>x<TILE_K>_s<STAGES>[_cluster2]_<a>, where <a> says
 * where wgmma's A operand (X) comes from: smem_a (both operands from shared memory as the TMA
 * wrote them: the tensor maps' element type truncates or rounds them on load) or rmem_a (X
 * rounded to TF32 in registers; W read as it is, so it must be rounded already); or _x3 for the
 * 3xTF32 builds (X split in registers, W read already split).
 * Launch contract without a cluster:
 *   - grid: min(num_tiles, num_SMs) CTAs, 1-D, no cluster; num_tiles = ceil(m/TILE_M) *
 *     ceil(n/TILE_N);
 *   - block THREADS, dynamic smem SMEM_BYTES (the stages, the epilogue buffers, the mbarriers
 *     and 1024 bytes of alignment slack);
 *   - tensor map boxes: {TILE_K, x_box_rows} for X (TILE_M rows, fewer when m < TILE_M:
 *     GeSm90Params), {TILE_K, TILE_N} for W, {STORE_BOX_COLS, STORE_BOX_ROWS} for
 *     out (every schedule: each warp stores its own rows).
 * Cluster entries (`_cluster2`): the same kernel (tiles, stages, THREADS, SMEM_BYTES) with the
 * CTAs paired into clusters of GE_SM90_CLUSTER_M along M. The CTAs of a cluster compute
 * vertically adjacent TILE_M x TILE_N tiles (one (CLUSTER_M*TILE_M) x TILE_N "cluster tile")
 * that share the same W tile: CTA rank r TMA-loads rows r*W_BOX_ROWS.. of it, W_BOX_ROWS =
 * TILE_N / CLUSTER_M, and multicasts the slice into every CTA of the cluster. Launch contract
 * (cuLaunchKernelEx):
 *   - attribute CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = (CLUSTER_M, 1, 1), always (the entry
 *     has no __cluster_dims__; without the attribute it would multicast to a CTA that is not
 *     there);
 *   - grid: CLUSTER_M * min(cluster_tiles, max active clusters) CTAs, 1-D, a multiple of
 *     CLUSTER_M; cluster_tiles = ceil(m / (CLUSTER_M*TILE_M)) * ceil(n / TILE_N); the max active
 *     clusters from cuOccupancyMaxActiveClusters with this block, smem and cluster shape (the
 *     clusters are persistent: the grid is what is resident at once, not one wave more);
 *   - block and smem as without a cluster; tensor map boxes as without a cluster, except
 *     {TILE_K, W_BOX_ROWS} for W.
 * Rows of the second CTA past m (m <= TILE_M, or m % (2*TILE_M) in 1..TILE_M) are zero-filled
 * by TMA and not stored; that CTA still loads and multicasts its W slice. Every cluster entry
 * (the five `_cluster2` symbols) has the same block and smem (sm90/entry.cuh checks it), so one
 * cuOccupancyMaxActiveClusters answer serves them all. */
#define GE_SM90_CLUSTER_M 2

/* pingpong 128x128: m64n128k8 wgmmas, 6 stages.
 * Entries: ge_sm90_pingpong_128x128x32_s6_{smem_a,rmem_a}, ge_sm90_pingpong_128x128x32_s6_cluster2_{smem_a,rmem_a}. */
#define GE_SM90_PINGPONG_128X128_TILE_M 128
#define GE_SM90_PINGPONG_128X128_TILE_N 128
#define GE_SM90_PINGPONG_128X128_TILE_K 32
#define GE_SM90_PINGPONG_128X128_STAGES 6
#define GE_SM90_PINGPONG_128X128_THREADS 384
#define GE_SM90_PINGPONG_128X128_SMEM_BYTES                                                                  \
    (GE_SM90_PINGPONG_128X128_STAGES * (GE_SM90_PINGPONG_128X128_TILE_M + GE_SM90_PINGPONG_128X128_TILE_N) * \
         GE_SM90_PINGPONG_128X128_TILE_K * 4 +                                                               \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* pingpong 64x128: one m64n128k8 per k-step, 8 stages (8 x 24 KiB = 6 x 32 KiB): for small M.
 * Half the rows of the 128-row tile per consumer, so twice the tiles: a problem of M <= 256
 * splits along K into half as many parts per tile, and each stream-K finisher adds half as many
 * (and half-size) partial tiles. Entries: ge_sm90_pingpong_64x128x32_s8_{smem_a,rmem_a}. */
#define GE_SM90_PINGPONG_64X128_TILE_M 64
#define GE_SM90_PINGPONG_64X128_TILE_N 128
#define GE_SM90_PINGPONG_64X128_TILE_K 32
#define GE_SM90_PINGPONG_64X128_STAGES 8
#define GE_SM90_PINGPONG_64X128_THREADS 384
#define GE_SM90_PINGPONG_64X128_SMEM_BYTES                                                                \
    (GE_SM90_PINGPONG_64X128_STAGES * (GE_SM90_PINGPONG_64X128_TILE_M + GE_SM90_PINGPONG_64X128_TILE_N) * \
         GE_SM90_PINGPONG_64X128_TILE_K * 4 +                                                             \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* pingpong 64x64: one m64n64k8 per k-step, 12 stages (12 x 16 KiB = 6 x 32 KiB): for M <= 128,
 * where a wave of these tiles needs no split (or half as many parts as the 64x128 tiles) and
 * each CTA streams its own 64 rows of W, as cuBLAS's 64x64 kernel does there.
 * Entries: ge_sm90_pingpong_64x64x32_s12_{smem_a,rmem_a}. */
#define GE_SM90_PINGPONG_64X64_TILE_M 64
#define GE_SM90_PINGPONG_64X64_TILE_N 64
#define GE_SM90_PINGPONG_64X64_TILE_K 32
#define GE_SM90_PINGPONG_64X64_STAGES 12
#define GE_SM90_PINGPONG_64X64_THREADS 384
#define GE_SM90_PINGPONG_64X64_SMEM_BYTES                                                              \
    (GE_SM90_PINGPONG_64X64_STAGES * (GE_SM90_PINGPONG_64X64_TILE_M + GE_SM90_PINGPONG_64X64_TILE_N) * \
         GE_SM90_PINGPONG_64X64_TILE_K * 4 +                                                           \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* cooperative 128x256: both consumers on every tile, 64 rows each (m64n256k8 wgmmas: fewer
 * shared-memory bytes per FLOP than the ping-pong's m64n128k8), 4 stages. With the cluster,
 * the cluster tile is 256 x 256 and each CTA reads 128 + 128 rows from L2 per k-block instead
 * of 128 + 256.
 * Entries: ge_sm90_cooperative_128x256x32_s4_{smem_a,rmem_a},
 *          ge_sm90_cooperative_128x256x32_s4_cluster2_{smem_a,rmem_a}. */
#define GE_SM90_COOPERATIVE_128X256_TILE_M 128
#define GE_SM90_COOPERATIVE_128X256_TILE_N 256
#define GE_SM90_COOPERATIVE_128X256_TILE_K 32
#define GE_SM90_COOPERATIVE_128X256_STAGES 4
#define GE_SM90_COOPERATIVE_128X256_THREADS 384
#define GE_SM90_COOPERATIVE_128X256_SMEM_BYTES                                                                        \
    (GE_SM90_COOPERATIVE_128X256_STAGES * (GE_SM90_COOPERATIVE_128X256_TILE_M + GE_SM90_COOPERATIVE_128X256_TILE_N) * \
         GE_SM90_COOPERATIVE_128X256_TILE_K * 4 +                                                                     \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* Tf32x3 (3xTF32) builds, entries ending in `_x3`: X split into big and small TF32 parts in
 * registers, W's two parts read from w_map and w_small_map, three wgmmas per k-step
 * (small*big, big*small, big*big), each k-block's sum added into the accumulator on the CUDA
 * cores (fp32, round to nearest: wgmma's accumulation is not as precise). Each stage holds one X tile and two W tiles,
 * so fewer stages fit; three times the tensor-core work per stage needs fewer to hide the loads behind. */

/* cooperative 128x128 x3: 64 rows per consumer (a 64x128 accumulator and a k-block's partial
 * sum fit in registers), 4 stages of 16 + 2 x 16 KiB.
 * Entries: ge_sm90_cooperative_128x128x32_s4_x3, ge_sm90_cooperative_128x128x32_s4_cluster2_x3. */
#define GE_SM90_COOPERATIVE_128X128_X3_TILE_M 128
#define GE_SM90_COOPERATIVE_128X128_X3_TILE_N 128
#define GE_SM90_COOPERATIVE_128X128_X3_TILE_K 32
#define GE_SM90_COOPERATIVE_128X128_X3_STAGES 4
#define GE_SM90_COOPERATIVE_128X128_X3_THREADS 384
#define GE_SM90_COOPERATIVE_128X128_X3_SMEM_BYTES                                              \
    (GE_SM90_COOPERATIVE_128X128_X3_STAGES *                                                   \
         (GE_SM90_COOPERATIVE_128X128_X3_TILE_M + 2 * GE_SM90_COOPERATIVE_128X128_X3_TILE_N) * \
         GE_SM90_COOPERATIVE_128X128_X3_TILE_K * 4 +                                           \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* pingpong 64x128 x3: 4 stages of 8 + 2 x 16 KiB: for small M.
 * Entry: ge_sm90_pingpong_64x128x32_s4_x3. */
#define GE_SM90_PINGPONG_64X128_X3_TILE_M 64
#define GE_SM90_PINGPONG_64X128_X3_TILE_N 128
#define GE_SM90_PINGPONG_64X128_X3_TILE_K 32
#define GE_SM90_PINGPONG_64X128_X3_STAGES 4
#define GE_SM90_PINGPONG_64X128_X3_THREADS 384
#define GE_SM90_PINGPONG_64X128_X3_SMEM_BYTES                                                                          \
    (GE_SM90_PINGPONG_64X128_X3_STAGES * (GE_SM90_PINGPONG_64X128_X3_TILE_M + 2 * GE_SM90_PINGPONG_64X128_X3_TILE_N) * \
         GE_SM90_PINGPONG_64X128_X3_TILE_K * 4 +                                                                       \
     GE_SM90_EPILOGUE_SMEM_BYTES + 2048)

/* ---- Skinny family (sm_90): csrc/skinny/ --------------------------------------------- */
/* Decoding-size X (m <= TILE_M): the GEMM streams W once and is bound by memory, not by the
 * tensor cores. out^T = W . X^T with mma.sync.m16n8k8: 16 rows of W as the A operand, 8 rows of
 * X as each B operand; every lane copies the 16-byte units of its own fragments into its own
 * shared-memory slots with cp.async (a ring of STAGES k-steps per warp) and reads them back.
 * Kernel parameter: `const GeProblem` by value. Grid: 1-D, ceil(n/TILE_N) * S CTAs, launched in
 * clusters of S along x (1 <= S <= GE_SKINNY_MAX_SPLIT; S = 1 may be a plain launch): cluster c
 * computes out[0..m, c*TILE_N ..+TILE_N], its CTA of rank r the r-th of S contiguous ranges of
 * the ceil(k/TILE_K) k-steps, its warps interleaved steps of that range. The warps' sums are
 * added in shared memory, the S ranks' sums by rank 0 through distributed shared memory (fixed
 * orders: a plan's result is bitwise repeatable), which applies the epilogue and stores.
 * Block: THREADS. Dynamic shared memory: SMEM_BYTES = STAGES * THREADS * TILE_K/16 * (2 +
 * TILE_M/8) * 16 (the rings), plus (THREADS/32 + 1) * TILE_M * 16 floats of static memory. Needs
 * m <= TILE_M, k % 4 == 0, x and w 16-byte aligned, ldx and ldw multiples of 4.
 * Entries: ge_sm90_skinny_<TILE_M>x16x<TILE_K>_s<STAGES> (operands rounded to TF32 in
 * registers, nearest, ties away), _trunc (fp32 bits: the tensor core truncates), _x3 (both
 * operands split into 3xTF32's parts in registers: a raw or rounded W, not a split one). */

/* 8x16: X rows 0..7, 8 warps, 4 stages of 32 k (96 KiB): m <= 8. */
#define GE_SKINNY_8X16_TILE_M 8
#define GE_SKINNY_8X16_TILE_N 16
#define GE_SKINNY_8X16_TILE_K 32
#define GE_SKINNY_8X16_STAGES 4
#define GE_SKINNY_8X16_THREADS 256
#define GE_SKINNY_8X16_SMEM_BYTES                                                                                      \
    (GE_SKINNY_8X16_STAGES * GE_SKINNY_8X16_THREADS * (GE_SKINNY_8X16_TILE_K / 16) * (2 + GE_SKINNY_8X16_TILE_M / 8) * \
     16)

/* 16x16: X rows 0..15, 4 warps, 4 stages of 32 k (64 KiB): m <= 16. */
#define GE_SKINNY_16X16_TILE_M 16
#define GE_SKINNY_16X16_TILE_N 16
#define GE_SKINNY_16X16_TILE_K 32
#define GE_SKINNY_16X16_STAGES 4
#define GE_SKINNY_16X16_THREADS 128
#define GE_SKINNY_16X16_SMEM_BYTES                                                      \
    (GE_SKINNY_16X16_STAGES * GE_SKINNY_16X16_THREADS * (GE_SKINNY_16X16_TILE_K / 16) * \
     (2 + GE_SKINNY_16X16_TILE_M / 8) * 16)

/* The most CTAs a cluster may hold without opting in to non-portable sizes. */
#define GE_SKINNY_MAX_SPLIT 8

/* ---- GEMV family (sm_80 and newer): csrc/gemv/ ------------------------------------------ */
/* Decoding-size X (m <= TILE_M) on the CUDA cores: W streamed once, 512 contiguous bytes of a W
 * row per warp load, one fp32 FMA per product. Kernel parameter: `const GeProblem` by value.
 * Grid: 1-D, ceil(n/TILE_N) CTAs: CTA c computes out[0..m, c*TILE_N ..+TILE_N] over all of K,
 * its THREADS/32 warps on interleaved 128-float chunks of K, UNROLL chunks per warp and loop
 * trip (TILE_K = 128 * THREADS/32 * UNROLL k per CTA and trip). The lanes' sums are added by
 * shuffles, the warps' in shared memory in warp order (fixed orders: bitwise repeatable).
 * Block: THREADS. Dynamic shared memory: none (THREADS/32 * TILE_M * TILE_N floats of static
 * memory). Needs m <= TILE_M, k % 4 == 0, x and w 16-byte aligned, ldx and ldw multiples of 4.
 * Entries: ge_sm80_gemv_<TILE_M>x<TILE_N>x<TILE_K>_s<UNROLL> (operands rounded to TF32 in
 * registers, nearest, ties away, then multiplied exactly in fp32), _trunc (operands truncated
 * to TF32, as the tensor cores read fp32 bits), _x3 (the fp32 operands multiplied as they are:
 * the fp32 product that 3xTF32 emulates). */

/* 1x2: X row 0, 2 rows of W, 8 warps, 2 chunks in flight per lane: m = 1 with K >= TILE_K. */
#define GE_GEMV_1X2_TILE_M 1
#define GE_GEMV_1X2_TILE_N 2
#define GE_GEMV_1X2_UNROLL 2
#define GE_GEMV_1X2_THREADS 256
#define GE_GEMV_1X2_TILE_K (128 * (GE_GEMV_1X2_THREADS / 32) * GE_GEMV_1X2_UNROLL)

/* 1x4: X row 0, 4 rows of W, 4 warps, 1 chunk per lane: m = 1 with a short K. */
#define GE_GEMV_1X4_TILE_M 1
#define GE_GEMV_1X4_TILE_N 4
#define GE_GEMV_1X4_UNROLL 1
#define GE_GEMV_1X4_THREADS 128
#define GE_GEMV_1X4_TILE_K (128 * (GE_GEMV_1X4_THREADS / 32) * GE_GEMV_1X4_UNROLL)

/* 4x4: X rows 0..3, 4 rows of W, 8 warps, 1 chunk per lane: m <= 4. */
#define GE_GEMV_4X4_TILE_M 4
#define GE_GEMV_4X4_TILE_N 4
#define GE_GEMV_4X4_UNROLL 1
#define GE_GEMV_4X4_THREADS 256
#define GE_GEMV_4X4_TILE_K (128 * (GE_GEMV_4X4_THREADS / 32) * GE_GEMV_4X4_UNROLL)

#endif /* GEMM_EPILOGUE_H */
