//! Shapes: a seeded sample of (M, N, K) triples over the tile-boundary set, run through Auto and
//! through every kernel forced, with and without bias, over the scales {0, 0.5, −1, 1e-3, 3};
//! plus the reference shape 16384 × 4096 × 4096 (tests named `reference_shape_*`, which a sanitizer
//! run can leave out with `--skip reference_shape`).
//!
//! Every case goes through `common::check`: poisoned output and NaN-padded inputs, f64 reference
//! (full, or sampled rows × columns for large problems) and cuBLAS + elementwise on every element,
//! and the plan against the crate's contract (`common::assert_plan_keeps_the_contract`).
//!
//! W reaches the kernels as the caller laid it out, rounded into the workspace, or as a
//! `PreparedWeight` (`Case::prepared_w`). The sm_90 kernels that round X in registers and read W
//! as given (`Kernel::needs_rounded_w`) run only on the last two: their tests cycle through a
//! prepared W, a workspace, both, and neither (which must be refused). The default rounding is
//! `Nearest` on every device, so `shapes_auto` on sm_90 runs the mma.sync kernels (a raw W and no
//! workspace), `shapes_auto_prepared_weight` the rounding TMA kernels, and
//! `shapes_auto_truncate` the truncating TMA kernels.

mod common;

use common::{Case, Gpu, XDist};
use gemm_epilogue::{Dispatch, Family, Kernel, Plan, Precision};

const DIMS: [usize; 24] =
    [1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257, 1000, 1023, 1024, 1025, 4095, 4096, 4097];
const SCALES: [f32; 5] = [0.0, 0.5, -1.0, 1e-3, 3.0];
/// At least this many triples per test.
const TRIPLES: usize = 64;
/// Work caps per triple, so each test runs in well under a minute on an H200 host with a debug
/// build: output elements (host checks, downloads) and input elements (host generation).
const MN_CAP: usize = 4097 * 1025;
const INPUT_CAP: usize = 1 << 25;

/// Always included: degenerate, tile-edge and large-K triples.
const FIXED: [(usize, usize, usize); 16] = [
    (1, 1, 1),
    (1, 1, 4097),
    (2, 3, 7),
    (8, 16, 16),
    (17, 33, 15),
    (63, 65, 64),
    (127, 129, 65),
    (129, 127, 1023),
    (255, 257, 31),
    (1000, 1023, 1025),
    (1024, 1024, 1024),
    (4097, 63, 1025),
    (63, 4097, 4095),
    (1025, 1023, 4096),
    (4097, 1024, 257),
    (1, 4097, 4097),
];

fn fits(&(m, n, k): &(usize, usize, usize)) -> bool {
    m * n <= MN_CAP && (m + n) * k <= INPUT_CAP
}

/// The triples: the fixed ones plus a seeded sample of the DIMS³ grid (the same for every test of
/// a run, since the generator is seeded by the run's seed and a fixed name).
fn triples() -> Vec<(usize, usize, usize)> {
    let mut rng = common::rng("gpu_shapes::triples");
    let mut v: Vec<_> = FIXED.to_vec();
    let mut guard = 0;
    while v.len() < TRIPLES && guard < 100_000 {
        guard += 1;
        let t = (rng.pick(&DIMS), rng.pick(&DIMS), rng.pick(&DIMS));
        if fits(&t) && !v.contains(&t) {
            v.push(t);
        }
    }
    assert!(v.len() >= 60, "could not sample enough triples");
    v
}

/// Runs every triple, with and without bias, through `dispatch`. Triples the forced kernel cannot
/// take (as the crate says and its specification agrees: `common::accepts`) must be refused with
/// `KernelUnavailable` (and write nothing).
fn run_shapes(g: &Gpu, dispatch: Dispatch, test: &str) {
    run_shapes_with(g, dispatch, test, |_, _, case| case);
}

/// [`run_shapes`] with `FusedGemm::with_precision(precision)`; every fourth triple with a workspace,
/// every fourth (another) with a prepared W.
fn run_shapes_rounded(g: &Gpu, dispatch: Dispatch, precision: Precision, test: &str) {
    run_shapes_with(g, dispatch, test, |i, _, case| {
        case.precision(precision).workspace(i % 4 == 1).prepared_w(i % 4 == 3)
    });
}

/// [`run_shapes`] for a kernel that reads W rounded ([`Kernel::needs_rounded_w`]): the cases
/// cycle through a prepared W, a workspace to round W into (every third of those by a handle
/// that truncates: the kernel rounds all the same), both, and neither — which must be refused.
fn run_shapes_rounding_w(g: &Gpu, dispatch: Dispatch, test: &str) {
    assert!(kernel_of(dispatch).needs_rounded_w(), "{dispatch:?}");
    let (ran, refused, prepared) = run_shapes_with(g, dispatch, test, |i, j, case| match (i + 2 * j) % 4 {
        0 => case.prepared_w(true),
        1 if i % 3 == 0 => case.workspace(true).precision(Precision::Tf32Truncated),
        1 => case.workspace(true),
        2 => case.prepared_w(true).workspace(true),
        _ => case,
    });
    if g.gemm.wave(kernel_of(dispatch)) > 0 {
        assert!(
            prepared > 0 && ran > prepared && refused > 0,
            "{test}: {ran} ran ({prepared} prepared), {refused} refused"
        );
    }
}

/// [`run_shapes`] for a kernel that reads W split ([`Kernel::needs_split_w`]): the cases cycle
/// through W prepared by a Tf32x3 handle, a workspace to split a raw W into (by the default
/// handle: the kernel's precision all the same), both, and neither — which must be refused.
fn run_shapes_split_w(g: &Gpu, dispatch: Dispatch, test: &str) {
    assert!(kernel_of(dispatch).needs_split_w(), "{dispatch:?}");
    let (ran, refused, prepared) = run_shapes_with(g, dispatch, test, |i, j, case| match (i + 2 * j) % 4 {
        0 => case.precision(Precision::Tf32x3).prepared_w(true),
        1 => case.workspace(true),
        2 => case.precision(Precision::Tf32x3).prepared_w(true).workspace(true),
        _ => case,
    });
    if g.gemm.wave(kernel_of(dispatch)) > 0 {
        assert!(
            prepared > 0 && ran > prepared && refused > 0,
            "{test}: {ran} ran ({prepared} prepared), {refused} refused"
        );
    }
}

fn kernel_of(dispatch: Dispatch) -> Kernel {
    match dispatch {
        Dispatch::Force(kernel) => kernel,
        Dispatch::Auto => panic!("not a forced kernel"),
    }
}

/// The loop of [`run_shapes`]: `vary(triple index, bias index, case)` sets each case's
/// precision, workspace and W. Returns how many cases ran, how many were refused, and how many of
/// those that ran had a prepared W.
fn run_shapes_with(
    g: &Gpu,
    dispatch: Dispatch,
    test: &str,
    vary: impl Fn(usize, usize, Case) -> Case,
) -> (usize, usize, usize) {
    if let Dispatch::Force(kernel) = dispatch {
        if g.gemm.wave(kernel) == 0 {
            // E.g. the 128×256 tile's 144 KiB of shared memory on a device with less.
            println!("skipped: {kernel:?} cannot run on this device ({:?})", g.gemm.device());
            return (0, 0, 0);
        }
    }
    let mut rng = common::rng(test);
    let (mut ran, mut refused, mut prepared) = (0usize, 0usize, 0usize);
    let start = std::time::Instant::now();
    for (i, (m, n, k)) in triples().into_iter().enumerate() {
        for (j, bias) in [true, false].into_iter().enumerate() {
            let case = Case::new(m, n, k)
                .bias(bias)
                .scale(SCALES[(2 * i + j) % SCALES.len()])
                .dispatch(dispatch)
                .x_dist(if i % 2 == 0 { XDist::Unit } else { XDist::Sym });
            let case = vary(i, j, case);
            match dispatch {
                Dispatch::Force(kernel) if !common::accepts(g, &case, kernel) => {
                    common::expect_refused(g, &case, kernel, &mut rng);
                    refused += 1;
                }
                _ => {
                    common::check(g, &case, &mut rng).expect("non-empty problem ran");
                    ran += 1;
                    prepared += case.prepared_w as usize;
                }
            }
        }
    }
    println!("{test}: {ran} cases checked ({prepared} with a prepared W), {refused} refused, {:.1?}", start.elapsed());
    assert!(ran > 0);
    (ran, refused, prepared)
}

#[test]
fn shapes_auto() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Auto, "shapes_auto");
}

#[test]
fn shapes_sm80_mma_128x128_vec4() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma128x128Vec4), "shapes_sm80_mma_128x128_vec4");
}

#[test]
fn shapes_sm80_mma_128x128_scalar() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma128x128Scalar), "shapes_sm80_mma_128x128_scalar");
}

#[test]
fn shapes_sm80_mma_128x256_vec4() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma128x256Vec4), "shapes_sm80_mma_128x256_vec4");
}

#[test]
fn shapes_sm80_mma_128x256_scalar() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma128x256Scalar), "shapes_sm80_mma_128x256_scalar");
}

/// `Nearest` asked explicitly (the default too): a raw W (the mma.sync kernels that round in
/// registers on sm_90), W rounded into a workspace (the rounding TMA kernels on problems of at
/// least 2^27 multiply-adds), or a prepared W (the rounding TMA kernels).
#[test]
fn shapes_auto_round_to_nearest() {
    let Some(g) = common::gpu() else { return };
    run_shapes_rounded(&g, Dispatch::Auto, Precision::Tf32, "shapes_auto_round_to_nearest");
}

/// Truncation asked: on sm_90 the truncating TMA kernels (a prepared W then holds W's bits as
/// they were).
#[test]
fn shapes_auto_truncate() {
    let Some(g) = common::gpu() else { return };
    run_shapes_rounded(&g, Dispatch::Auto, Precision::Tf32Truncated, "shapes_auto_truncate");
}

/// The default handle (`Nearest`) on a prepared W, every other triple with a workspace: on sm_90
/// the TMA kernels that round X in registers, reading the prepared W without a repack.
#[test]
fn shapes_auto_prepared_weight() {
    let Some(g) = common::gpu() else { return };
    assert_eq!(g.gemm.precision(), Precision::Tf32, "the default rounding");
    run_shapes_with(&g, Dispatch::Auto, "shapes_auto_prepared_weight", |i, _, case| {
        case.prepared_w(true).workspace(i % 2 == 1)
    });
}

#[test]
fn shapes_sm80_mma_128x128_vec4_trunc() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma128x128Vec4Trunc), "shapes_sm80_mma_128x128_vec4_trunc");
}

#[test]
fn shapes_sm80_mma_128x256_vec4_trunc() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma128x256Vec4Trunc), "shapes_sm80_mma_128x256_vec4_trunc");
}

#[test]
fn shapes_sm80_mma_64x64_vec4() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma64x64Vec4), "shapes_sm80_mma_64x64_vec4");
}

#[test]
fn shapes_sm80_mma_64x64_vec4_x3() {
    let Some(g) = common::gpu() else { return };
    run_shapes_rounded(
        &g,
        Dispatch::Force(Kernel::Sm80Mma64x64Vec4Tf32x3),
        Precision::Tf32x3,
        "shapes_sm80_mma_64x64_vec4_x3",
    );
}

#[test]
fn shapes_sm80_mma_64x64_scalar_x3() {
    let Some(g) = common::gpu() else { return };
    run_shapes_rounded(
        &g,
        Dispatch::Force(Kernel::Sm80Mma64x64ScalarTf32x3),
        Precision::Tf32x3,
        "shapes_sm80_mma_64x64_scalar_x3",
    );
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple that
/// has a split W or a workspace, and refuse the others.
#[test]
fn shapes_sm90_cooperative_128x128_x3() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x128Tf32x3") else { return };
    run_shapes_split_w(&g, Dispatch::Force(Kernel::Sm90Cooperative128x128Tf32x3), "shapes_sm90_cooperative_128x128_x3");
}

#[test]
fn shapes_sm90_cooperative_128x128_cluster2_x3() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x128Cluster2Tf32x3") else { return };
    run_shapes_split_w(
        &g,
        Dispatch::Force(Kernel::Sm90Cooperative128x128Cluster2Tf32x3),
        "shapes_sm90_cooperative_128x128_cluster2_x3",
    );
}

#[test]
fn shapes_sm90_pingpong_64x128_x3() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x128Tf32x3") else { return };
    run_shapes_split_w(&g, Dispatch::Force(Kernel::Sm90Pingpong64x128Tf32x3), "shapes_sm90_pingpong_64x128_x3");
}

#[test]
fn shapes_sm80_mma_64x64_scalar() {
    let Some(g) = common::gpu() else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm80Mma64x64Scalar), "shapes_sm80_mma_64x64_scalar");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple.
#[test]
fn shapes_sm90_pingpong_128x128_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128SmemA") else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA), "shapes_sm90_pingpong_128x128_smem_a");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple.
#[test]
fn shapes_sm90_pingpong_64x128_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x128SmemA") else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm90Pingpong64x128SmemA), "shapes_sm90_pingpong_64x128_smem_a");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple.
#[test]
fn shapes_sm90_pingpong_64x64_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x64SmemA") else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm90Pingpong64x64SmemA), "shapes_sm90_pingpong_64x64_smem_a");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple.
#[test]
fn shapes_sm90_pingpong_128x128_cluster2_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128Cluster2SmemA") else { return };
    run_shapes(
        &g,
        Dispatch::Force(Kernel::Sm90Pingpong128x128Cluster2SmemA),
        "shapes_sm90_pingpong_128x128_cluster2_smem_a",
    );
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple.
#[test]
fn shapes_sm90_cooperative_128x256_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256SmemA") else { return };
    run_shapes(&g, Dispatch::Force(Kernel::Sm90Cooperative128x256SmemA), "shapes_sm90_cooperative_128x256_smem_a");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple.
#[test]
fn shapes_sm90_cooperative_128x256_cluster2_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256Cluster2SmemA") else { return };
    run_shapes(
        &g,
        Dispatch::Force(Kernel::Sm90Cooperative128x256Cluster2SmemA),
        "shapes_sm90_cooperative_128x256_cluster2_smem_a",
    );
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple that
/// has a prepared W or a workspace, and refuse the others.
#[test]
fn shapes_sm90_pingpong_128x128_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128RmemA") else { return };
    run_shapes_rounding_w(&g, Dispatch::Force(Kernel::Sm90Pingpong128x128RmemA), "shapes_sm90_pingpong_128x128_rmem_a");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple that
/// has a prepared W or a workspace, and refuse the others.
#[test]
fn shapes_sm90_pingpong_64x128_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x128RmemA") else { return };
    run_shapes_rounding_w(&g, Dispatch::Force(Kernel::Sm90Pingpong64x128RmemA), "shapes_sm90_pingpong_64x128_rmem_a");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple that
/// has a prepared W or a workspace, and refuse the others.
#[test]
fn shapes_sm90_pingpong_64x64_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x64RmemA") else { return };
    run_shapes_rounding_w(&g, Dispatch::Force(Kernel::Sm90Pingpong64x64RmemA), "shapes_sm90_pingpong_64x64_rmem_a");
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple that
/// has a prepared W or a workspace, and refuse the others.
#[test]
fn shapes_sm90_pingpong_128x128_cluster2_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128Cluster2RmemA") else { return };
    run_shapes_rounding_w(
        &g,
        Dispatch::Force(Kernel::Sm90Pingpong128x128Cluster2RmemA),
        "shapes_sm90_pingpong_128x128_cluster2_rmem_a",
    );
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple that
/// has a prepared W or a workspace, and refuse the others.
#[test]
fn shapes_sm90_cooperative_128x256_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256RmemA") else { return };
    run_shapes_rounding_w(
        &g,
        Dispatch::Force(Kernel::Sm90Cooperative128x256RmemA),
        "shapes_sm90_cooperative_128x256_rmem_a",
    );
}

/// Skips (with a printed line) off sm_90; on sm_90 it must run every TMA-compatible triple that
/// has a prepared W or a workspace, and refuse the others.
#[test]
fn shapes_sm90_cooperative_128x256_cluster2_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256Cluster2RmemA") else { return };
    run_shapes_rounding_w(
        &g,
        Dispatch::Force(Kernel::Sm90Cooperative128x256Cluster2RmemA),
        "shapes_sm90_cooperative_128x256_cluster2_rmem_a",
    );
}

/// The 2-CTA cluster kernels where their two CTAs differ: M not a multiple of 256 puts the
/// second CTA's rows (partly, or for M % 256 in 1..=128 entirely) past M. That CTA must still
/// load and multicast its half of the W tile and take part in every barrier, or its peer hangs or
/// reads a stale slice. Includes M <= 128 (one cluster row, the second CTA never has a row), and
/// grids smaller than the cluster-tile count (persistent clusters loop over several tiles,
/// wrapping the stage ring) with such rows in every tile.
#[test]
fn cluster2_out_of_range_rows() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128Cluster2SmemA") else { return };
    let mut rng = common::rng("cluster2_out_of_range_rows");
    let mut cases = Vec::new();
    for m in [1, 64, 127, 128, 129, 200, 255, 256, 257, 300, 383, 384, 385, 511, 513, 1000] {
        for (n, k) in [(128, 64), (130, 36), (300, 100), (1, 4)] {
            cases.push(Case::new(m, n, k));
        }
    }
    // More cluster tiles than resident clusters: every cluster runs several tiles.
    cases.push(Case::new(100, 16384, 96)); // 128 (ping-pong) cluster tiles, second CTA always empty
    cases.push(Case::new(100, 33000, 40)); // 129 cooperative cluster tiles, second CTA always empty
    cases.push(Case::new(129, 16384, 40).bias(false)); // second CTA: one row per tile
    cases.push(Case::new(4097, 1025, 68)); // 17 × 9 cluster tiles, last row: 1 row
    cases.push(Case::new(2000, 4096, 260).pad(4, 8, 3)); // strided, last cluster row: 208 rows

    // The truncating cluster kernels on W as given, and their rounding twins on a prepared W
    // (even cases) or on W rounded into the workspace (odd cases; too little K and too few
    // waves here for stream-K).
    let trunc = [Kernel::Sm90Pingpong128x128Cluster2SmemA, Kernel::Sm90Cooperative128x256Cluster2SmemA];
    let rounding = trunc.map(|k| common::rounding_twin(k).expect("a rounding twin"));
    for kernel in trunc.into_iter().chain(rounding) {
        assert_eq!(kernel.cluster_m(), 2, "{kernel:?}");
        // Clusters resident at once: the most the persistent grid launches.
        let clusters = g.gemm.wave(kernel) as usize;
        assert!(clusters > 0, "an sm_90 device with no room for a 2-CTA cluster of {kernel:?}: {:?}", g.gemm.device());
        let (tile_m, tile_n, _) = kernel.tile();
        let cluster_rows = (tile_m * kernel.cluster_m()) as usize;
        for (i, case) in cases.iter().enumerate() {
            let mut case = case.force(kernel).scale(if i % 3 == 0 { 0.5 } else { 3.0 });
            if kernel.needs_rounded_w() {
                case = if i % 2 == 0 { case.prepared_w(true) } else { case.workspace(true) };
            }
            let plan = common::check(&g, &case, &mut rng).expect("ran");
            let cluster_tiles = case.m.div_ceil(cluster_rows) * case.n.div_ceil(tile_n as usize);
            assert_eq!((plan.kernel, plan.cluster, plan.stream_k_tiles), (kernel, 2, 0), "{plan:?} for {case:?}");
            assert_eq!(plan.grid as usize, 2 * cluster_tiles.min(clusters), "{plan:?} for {case:?}");
        }
    }
}

/// A few small shapes through every kernel this device has, with tails in M, N and K, a strided
/// output and a repacked operand: quick enough for compute-sanitizer's racecheck and synccheck
/// (`bash .gpu/run sanitize racecheck small_shapes_every_kernel`).
#[test]
fn small_shapes_every_kernel() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("small_shapes_every_kernel");
    let cases = [
        Case::new(1, 1, 4),
        Case::new(130, 70, 36).pad(4, 0, 3),
        Case::new(257, 129, 100).bias(false).scale(3.0),
        Case::new(70, 260, 64).scale(-1.0),
        // M % 256 in 1..=128: the second CTA of a 2-CTA cluster has no row in range.
        Case::new(300, 136, 68).pad(0, 4, 1),
    ];
    for case in cases {
        for kernel in Kernel::ALL {
            // Every case has 16-byte rows: refused only by kernels this device cannot run, by
            // the skinny kernels beyond their rows of X, and by those that read W rounded when W
            // is raw and there is no workspace; those run on a prepared W instead.
            let case = if kernel.needs_rounded_w() {
                assert!(!common::accepts(&g, &case, kernel), "{kernel:?} on a raw W without a workspace");
                case.prepared_w(true)
            } else if kernel.needs_split_w() {
                assert!(!common::accepts(&g, &case, kernel), "{kernel:?} on a raw W without a workspace");
                case.precision(Precision::Tf32x3).prepared_w(true)
            } else {
                case
            };
            if common::accepts(&g, &case, kernel) {
                common::check(&g, &case.force(kernel), &mut rng);
            } else {
                let too_many_rows = kernel.max_m().is_some_and(|rows| case.m > rows as usize);
                assert!(g.gemm.wave(kernel) == 0 || too_many_rows, "{kernel:?} refused {case:?}");
            }
        }
        common::check(&g, &case, &mut rng);
        common::check(&g, &case.prepared_w(true), &mut rng);
    }
    // K % 4 != 0: every kernel that reads 16-byte rows repacks both operands into the workspace.
    let unaligned = Case::new(65, 66, 67).workspace(true);
    for kernel in Kernel::ALL.into_iter().filter(|k| k.needs_aligned_rows()) {
        if common::accepts(&g, &unaligned, kernel) {
            let plan = common::check(&g, &unaligned.force(kernel), &mut rng).expect("ran");
            assert!(plan.repack_x && plan.repack_w, "{plan:?}");
        }
    }
    if g.is_hopper() {
        // Split-K through the workspace: 15 tiles over 30 CTAs, for the truncating kernel on W as
        // given and for its rounding twin on a prepared W (nothing repacked).
        let split = Case::new(300, 520, 512).workspace(true);
        for case in [
            split.force(Kernel::Sm90Pingpong128x128SmemA),
            split.force(Kernel::Sm90Pingpong128x128RmemA).prepared_w(true),
        ] {
            let plan = common::check(&g, &case, &mut rng).expect("ran");
            assert!(plan.stream_k_tiles == 15 && plan.grid == 30 && !plan.repack_x && !plan.repack_w, "{plan:?}");
        }
    }
}

/// Stream-K (sm_90 TMA kernel with a workspace): shapes with at most half as many tiles as SMs
/// have every tile split along K into the same number of parts (split-K); shapes with at least
/// 8 full waves share their last, partial wave (with the wave before when it is thin) along K,
/// if its tiles have 48 k-blocks or more and it is at most 3/5 full; the rest keep the plain
/// persistent schedule. The truncating 128×128 ping-pong and its rounding twin (on a prepared
/// W, or on W rounded into the workspace) plan the same stream-K; each is checked against f64
/// and cuBLAS and run twice: the partial sums are added in a fixed order, so both outputs must
/// be bitwise equal.
#[test]
fn stream_k_shapes() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128SmemA's stream-K") else { return };
    let mut rng = common::rng("stream_k_shapes");
    // (M, N, K, stream-K tiles the plan must have); 128×128 tiles, 132 SMs.
    let shapes = [
        (1, 4096, 4096, 32),     // 32 tiles: split-K, 4 CTAs a tile
        (1, 4096, 4000, 32),     // 4 CTAs a tile, 125 k-blocks: CTAs straddle tiles
        (129, 1000, 2048, 16),   // 16 tiles, M and N tails
        (300, 520, 512, 15),     // 15 tiles, 2 CTAs a tile
        (64, 8064, 680, 63),     // 63 tiles, 2 CTAs a tile, 22 k-blocks (the last one partial)
        (64, 8192, 680, 0),      // 64 tiles: no split (SPLIT_K_MAX_TILES), though half a wave allows 2 parts
        (384, 4096, 1024, 0),    // 96 tiles, more than half a wave: one CTA a tile
        (1280, 1792, 1024, 0),   // 140 tiles: plain persistent
        (4096, 4096, 4096, 0),   // 1024 tiles, 7 waves: plain persistent
        (67918, 252, 1544, 138), // 1062 tiles = 8 waves + 6: those 6 and the wave before
        (70783, 253, 1540, 50),  // 1106 tiles = 8 waves + 50: those 50 (49 k-blocks each)
        (73983, 253, 64, 0),     // 1156 tiles = 8 waves + 100: not shared (2 k-blocks each; over 3/5 of a wave)
    ];
    if g.gemm.device().sm_count != 132 {
        println!("note: the stream-K tile counts below assume 132 SMs; checking results only");
    }
    for (i, &(m, n, k, sk)) in shapes.iter().enumerate() {
        let base = Case::new(m, n, k)
            .workspace(true)
            .bias(i % 2 == 0)
            .scale(if i % 3 == 0 { 0.5 } else { -2.0 })
            .x_dist(if i % 2 == 0 { XDist::Unit } else { XDist::Sym });
        let inputs = common::Inputs::generate(&base, &mut rng);
        // The truncating kernel on W as given, then its rounding twin on a prepared W (even
        // shapes) or on W rounded into the workspace ahead of the partial tiles (odd shapes):
        // the same tiles, so the same stream-K.
        let cases = [
            base.force(Kernel::Sm90Pingpong128x128SmemA),
            base.force(Kernel::Sm90Pingpong128x128RmemA).prepared_w(i % 2 == 0),
        ];
        let mut plans = Vec::new();
        for case in cases {
            let plan = common::check_inputs(&g, &case, &inputs, &mut rng).expect("ran");
            if g.gemm.device().sm_count == 132 {
                assert_eq!(plan.stream_k_tiles as usize, sk, "{plan:?} for {m}x{n}x{k}");
            }
            assert_bitwise_repeatable(&g, &case, &inputs, &format!("{m}x{n}x{k} ({plan:?})"));
            println!("{m}x{n}x{k}: {plan:?}");
            plans.push(plan);
        }
        assert_eq!(
            (plans[0].grid, plans[0].stream_k_tiles, plans[0].stream_k_ctas),
            (plans[1].grid, plans[1].stream_k_tiles, plans[1].stream_k_ctas),
            "{m}x{n}x{k}: twins plan alike: {plans:?}"
        );
    }
}

/// Stream-K in the sm_90 kernels whose "CTA" is a cluster or whose tile is shared by both
/// consumer warpgroups: every CTA of a cluster and every consumer publishes its own part of a
/// partial tile and marks its own ready word. Split-K (including a cluster whose second CTA has
/// a single row, M = 129), shared tails of at least 8 waves of clusters (66 on the H200), and
/// last waves that stay unshared (short tiles, or more than 3/5 of a wave).
/// Each truncating kernel and its rounding twin (on a prepared W, or on W rounded into the
/// workspace), checked against f64 and cuBLAS, and run twice for bitwise-equal outputs.
#[test]
fn stream_k_shapes_clusters_and_cooperative() {
    let Some(g) = common::hopper_gpu("stream-K of the cluster and cooperative kernels") else { return };
    let mut rng = common::rng("stream_k_shapes_clusters_and_cooperative");
    let counts_known =
        g.gemm.device().sm_count == 132 && g.gemm.wave(Kernel::Sm90Cooperative128x256Cluster2SmemA) == 66;
    if !counts_known {
        println!("note: the stream-K tile counts below assume 132 SMs and 66 clusters; checking results only");
    }
    // (kernel, M, N, K, stream-K (cluster) tiles the plan must have)
    let cases = [
        (Kernel::Sm90Cooperative128x256SmemA, 1, 4096, 4096, 16), // 16 tiles of 128×256, 8 CTAs a tile
        (Kernel::Sm90Cooperative128x256SmemA, 300, 1000, 512, 12), // 12 tiles, 2 CTAs a tile, M and N tails
        (Kernel::Sm90Cooperative128x256SmemA, 45061, 520, 1540, 135), // 1059 tiles = 8 waves + 3: with the wave before
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, 1, 4096, 4096, 16), // 16 cluster tiles of 256×256, 4 clusters a tile
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, 129, 1000, 2048, 4), // second CTA: one row
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, 300, 520, 512, 6),
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, 45061, 520, 1544, 69), // 531 = 8 waves of 66 + 3
        (Kernel::Sm90Pingpong128x128Cluster2SmemA, 1, 4096, 4096, 32),
        (Kernel::Sm90Pingpong128x128Cluster2SmemA, 300, 520, 512, 10),
        (Kernel::Sm90Pingpong128x128Cluster2SmemA, 45061, 520, 1540, 27), // 885 = 13 waves of 66 + 27
        (Kernel::Sm90Pingpong128x128Cluster2SmemA, 45061, 520, 96, 0),    // the same, 3 k-blocks a tile: not shared
        (Kernel::Sm90Pingpong64x128SmemA, 1, 4096, 4096, 32),             // 32 tiles of 64×128, 4 CTAs a tile
        (Kernel::Sm90Pingpong64x128SmemA, 129, 1000, 2600, 24), // 24 tiles, 5 CTAs a tile (82 k-blocks, the last partial), M and N tails
        (Kernel::Sm90Pingpong64x128SmemA, 39673, 520, 1540, 64), // 3100 tiles = 23 waves + 64: those 64
        (Kernel::Sm90Pingpong64x128SmemA, 40000, 520, 1540, 0), // 3125 tiles = 23 waves + 89: over 3/5 of a wave, not shared
        (Kernel::Sm90Pingpong64x128SmemA, 17216, 512, 1540, 152), // 1076 = 8 waves + 20: with the wave before
        (Kernel::Sm90Pingpong64x64SmemA, 1, 4032, 4096, 63),    // 63 tiles of 64×64, 2 CTAs a tile
        (Kernel::Sm90Pingpong64x64SmemA, 100, 1000, 2048, 32),  // 32 tiles, 4 CTAs a tile, M and N tails
    ];
    for (i, &(kernel, m, n, k, sk)) in cases.iter().enumerate() {
        let base = Case::new(m, n, k)
            .workspace(true)
            .bias(i % 3 != 1)
            .scale(if i % 2 == 0 { 0.5 } else { -2.0 })
            .x_dist(if i % 2 == 0 { XDist::Unit } else { XDist::Sym });
        let inputs = common::Inputs::generate(&base, &mut rng);
        // The truncating kernel on W as given, then its rounding twin on a prepared W (even
        // cases) or on W rounded into the workspace (odd cases): the same stream-K.
        let twin = common::rounding_twin(kernel).expect("a rounding twin");
        let mut plans = Vec::new();
        for (kernel, prepared) in [(kernel, false), (twin, i % 2 == 0)] {
            let case = base.force(kernel).prepared_w(prepared);
            let plan = common::check_inputs(&g, &case, &inputs, &mut rng).expect("ran");
            assert_eq!(plan.kernel, kernel);
            if counts_known {
                assert_eq!(plan.stream_k_tiles as usize, sk, "{plan:?} for {m}x{n}x{k}");
            }
            assert_bitwise_repeatable(&g, &case, &inputs, &format!("{m}x{n}x{k} ({plan:?})"));
            println!("{m}x{n}x{k}: {plan:?}");
            plans.push(plan);
        }
        assert_eq!(
            (plans[0].grid, plans[0].stream_k_tiles, plans[0].stream_k_ctas),
            (plans[1].grid, plans[1].stream_k_tiles, plans[1].stream_k_ctas),
            "{m}x{n}x{k}: twins plan alike: {plans:?}"
        );
    }
}

/// Runs `case` twice more and checks the two outputs are bitwise equal: stream-K adds its partial
/// tiles in a fixed order, whatever order the CTAs finish in.
fn assert_bitwise_repeatable(g: &Gpu, case: &Case, inputs: &common::Inputs, what: &str) {
    let first = common::execute(g, case, inputs, false);
    let again = common::execute(g, case, inputs, false);
    assert!(
        first.fused.iter().zip(&again.fused).all(|(a, b)| a.to_bits() == b.to_bits()),
        "stream-K output differs between two runs for {what}"
    );
}

#[test]
fn stream_k_shapes_mma_sync() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("stream_k_shapes_mma_sync");
    // Each kernel on split-K shapes (fewer tiles than resident CTAs: every tile shared) and on a
    // shape with at least 8 full waves of its tiles and a partial one (the tail shared). How
    // many tiles that is depends on how many CTAs fit per SM, so the plan is checked against
    // the rule's invariants rather than fixed counts.
    let kernels = [
        (Kernel::Sm80Mma128x256Vec4, (4352, 8192, 96)), // 128×256, staged epilogue, rounding
        (Kernel::Sm80Mma128x128Vec4Trunc, (4352, 8192, 64)), // 128×128, truncating
        (Kernel::Sm80Mma64x64Scalar, (4352, 8192, 33)), // 64×64, 4-byte loads, K % 4 != 0
    ];
    for (i, &(kernel, tail_shape)) in kernels.iter().enumerate() {
        // CTAs resident at once: the wave stream-K shares tiles among (0: cannot run here, e.g.
        // the 128×256 tile's 144 KiB of shared memory on a device with less).
        let resident = g.gemm.wave(kernel);
        if resident == 0 {
            println!("{kernel}: cannot run on this device ({:?})", g.gemm.device());
            continue;
        }
        let (tm, tn, _) = kernel.tile();
        let (tm_, tn_, tk_) = tail_shape;
        let shapes = [(1, 4096, 4096, true), (129, 1000, 2048, true), (300, 520, 777, true), (tm_, tn_, tk_, false)];
        for (j, &(m, n, k, split)) in shapes.iter().enumerate() {
            let case = Case::new(m, n, k)
                .force(kernel)
                .workspace(true)
                .bias((i + j) % 2 == 0)
                .scale(if j % 2 == 0 { 0.5 } else { -2.0 })
                .x_dist(if (i + j) % 2 == 0 { XDist::Unit } else { XDist::Sym });
            let inputs = common::Inputs::generate(&case, &mut rng);
            let plan = common::check_inputs(&g, &case, &inputs, &mut rng).expect("ran");
            let tiles = (m.div_ceil(tm as usize) * n.div_ceil(tn as usize)) as u32;
            if !split && (tiles % resident == 0 || tiles / resident < 8) {
                assert_eq!(plan.stream_k_tiles, 0, "{kernel} {m}x{n}x{k}: whole waves only ({plan:?})");
                continue;
            }
            assert!(plan.stream_k_tiles > 0, "{kernel} {m}x{n}x{k}: no stream-K ({plan:?})");
            if split {
                assert_eq!(plan.stream_k_tiles, tiles, "{kernel} {m}x{n}x{k}: split-K shares every tile");
                assert!(plan.stream_k_ctas > tiles && plan.stream_k_ctas <= resident, "{plan:?}");
            } else {
                assert!(plan.stream_k_tiles < tiles && plan.stream_k_ctas == resident, "{plan:?}");
            }
            assert_eq!(plan.grid, tiles - plan.stream_k_tiles + plan.stream_k_ctas, "{plan:?}");
            assert_bitwise_repeatable(&g, &case, &inputs, &format!("{kernel} {m}x{n}x{k} ({plan:?})"));
            println!("{kernel} {m}x{n}x{k}: {plan:?}");
        }
    }
}

// ---- the reference shape ----------------------------------------------------------------------

fn reference_shape(g: &Gpu, dispatch: Dispatch, test: &str) {
    reference_case(g, Case::new(16384, 4096, 4096).dispatch(dispatch), test);
}

fn reference_case(g: &Gpu, case: Case, test: &str) -> Plan {
    let mut rng = common::rng(test);
    let case = case.bias(true).scale(0.5);
    let start = std::time::Instant::now();
    let plan = common::check(g, &case, &mut rng).expect("ran");
    println!("{test}: {plan:?} checked in {:.1?}", start.elapsed());
    plan
}

/// On sm_90, Auto with a `Tf32` handle runs a kernel fed from shared memory through TF32 tensor
/// maps, whatever W is: the TMA rounds X and W on load, nothing is repacked.
fn assert_rounds_on_load(g: &Gpu, plan: &Plan) {
    assert_eq!((plan.precision, plan.repack_x, plan.repack_w), (Precision::Tf32, false, false), "{plan:?}");
    if g.is_hopper() {
        assert!(plan.round_on_load && plan.kernel.can_round_on_load(), "{plan:?}");
    } else {
        assert_eq!((plan.kernel.family(), plan.round_on_load), (Family::MmaSync, false), "{plan:?}");
    }
}

/// The default handle (`Tf32`) on a raw W without a workspace: rounded on load on sm_90, by the
/// mma.sync kernels in registers elsewhere.
#[test]
fn reference_shape_auto() {
    let Some(g) = common::gpu() else { return };
    let plan = reference_case(&g, Case::new(16384, 4096, 4096), "reference_shape_auto");
    assert_rounds_on_load(&g, &plan);
}

/// Truncation asked: on sm_90 the truncating cooperative cluster kernel, as Auto's default was
/// before rounding became the default.
#[test]
fn reference_shape_auto_truncate() {
    let Some(g) = common::gpu() else { return };
    let case = Case::new(16384, 4096, 4096).precision(Precision::Tf32Truncated);
    let plan = reference_case(&g, case, "reference_shape_auto_truncate");
    if g.is_hopper() {
        assert_eq!((plan.kernel.family(), plan.precision), (Family::TmaWgmma, Precision::Tf32Truncated), "{plan:?}");
    }
}

/// The default handle on a prepared W, no workspace: the same kernel as on a raw W.
#[test]
fn reference_shape_auto_prepared_weight() {
    let Some(g) = common::gpu() else { return };
    let case = Case::new(16384, 4096, 4096).prepared_w(true);
    let plan = reference_case(&g, case, "reference_shape_auto_prepared_weight");
    assert_rounds_on_load(&g, &plan);
}

#[test]
fn reference_shape_sm80_mma_128x128_vec4() {
    let Some(g) = common::gpu() else { return };
    reference_shape(&g, Dispatch::Force(Kernel::Sm80Mma128x128Vec4), "reference_shape_sm80_mma_128x128_vec4");
}

#[test]
fn reference_shape_sm80_mma_128x256_vec4() {
    let Some(g) = common::gpu() else { return };
    reference_shape(&g, Dispatch::Force(Kernel::Sm80Mma128x256Vec4), "reference_shape_sm80_mma_128x256_vec4");
}

#[test]
fn reference_shape_sm80_mma_128x256_vec4_trunc() {
    let Some(g) = common::gpu() else { return };
    reference_shape(
        &g,
        Dispatch::Force(Kernel::Sm80Mma128x256Vec4Trunc),
        "reference_shape_sm80_mma_128x256_vec4_trunc",
    );
}

/// Round-to-nearest on the reference shape with a raw W and a workspace (stream-K shares the
/// last wave): still rounded on load, nothing repacked.
#[test]
fn reference_shape_auto_round_to_nearest() {
    let Some(g) = common::gpu() else { return };
    let case = Case::new(16384, 4096, 4096).precision(Precision::Tf32).workspace(true);
    let plan = reference_case(&g, case, "reference_shape_auto_round_to_nearest");
    assert_rounds_on_load(&g, &plan);
}

/// The rounding cooperative cluster kernel (Auto's pick on sm_90) forced on a prepared W.
#[test]
fn reference_shape_sm90_cooperative_128x256_cluster2_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256Cluster2RmemA") else { return };
    let case = Case::new(16384, 4096, 4096).force(Kernel::Sm90Cooperative128x256Cluster2RmemA).prepared_w(true);
    reference_case(&g, case, "reference_shape_sm90_cooperative_128x256_cluster2_rmem_a");
}

/// The rounding 128×128 ping-pong forced on a raw W with a workspace: W rounded into it, then
/// the stream-K tail.
#[test]
fn reference_shape_sm90_pingpong_128x128_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128RmemA") else { return };
    let case = Case::new(16384, 4096, 4096).force(Kernel::Sm90Pingpong128x128RmemA).workspace(true);
    let plan = reference_case(&g, case, "reference_shape_sm90_pingpong_128x128_rmem_a");
    assert!(plan.repack_w && !plan.repack_x && plan.stream_k_tiles > 0, "{plan:?}");
}

#[test]
fn reference_shape_sm90_pingpong_128x128_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128SmemA") else { return };
    reference_shape(
        &g,
        Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA),
        "reference_shape_sm90_pingpong_128x128_smem_a",
    );
}

#[test]
fn reference_shape_sm90_pingpong_128x128_cluster2_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128Cluster2SmemA") else { return };
    reference_shape(
        &g,
        Dispatch::Force(Kernel::Sm90Pingpong128x128Cluster2SmemA),
        "reference_shape_sm90_pingpong_128x128_cluster2_smem_a",
    );
}

#[test]
fn reference_shape_sm90_cooperative_128x256_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256SmemA") else { return };
    reference_shape(
        &g,
        Dispatch::Force(Kernel::Sm90Cooperative128x256SmemA),
        "reference_shape_sm90_cooperative_128x256_smem_a",
    );
}

#[test]
fn reference_shape_sm90_cooperative_128x256_cluster2_smem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256Cluster2SmemA") else { return };
    reference_shape(
        &g,
        Dispatch::Force(Kernel::Sm90Cooperative128x256Cluster2SmemA),
        "reference_shape_sm90_cooperative_128x256_cluster2_smem_a",
    );
}

/// The `shapes_*` test of a kernel: its symbol without the `ge_` prefix, the tile's K and the
/// stage count (`ge_sm90_pingpong_64x128x32_s8_smem_a` → `shapes_sm90_pingpong_64x128_smem_a`).
fn shapes_test_name(kernel: Kernel) -> String {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<String> = kernel
        .name()
        .strip_prefix("ge_")
        .unwrap_or_else(|| panic!("{} does not start with ge_", kernel.name()))
        .split('_')
        .filter(|p| !(p.starts_with('s') && digits(&p[1..])))
        .map(|p| match p.split('x').collect::<Vec<_>>()[..] {
            [m, n, k] if digits(m) && digits(n) && digits(k) => {
                let (tm, tn, tk) = kernel.tile();
                assert_eq!(
                    format!("{m}x{n}x{k}"),
                    format!("{tm}x{tn}x{tk}"),
                    "{kernel:?}: the symbol names another tile"
                );
                format!("{m}x{n}")
            }
            _ => p.to_string(),
        })
        .collect();
    format!("shapes_{}", parts.join("_"))
}

/// Every kernel in the fatbin has a `shapes_*` test above, named after it ([`shapes_test_name`]),
/// that forces it and seeds its generator with its own name (runs without a GPU): adding a kernel
/// without adding its test fails here.
#[test]
fn every_kernel_has_a_shapes_test() {
    let source = include_str!("gpu_shapes.rs");
    for k in Kernel::ALL {
        let name = shapes_test_name(k);
        let Some((_, rest)) = source.split_once(&format!("#[test]\nfn {name}() {{\n")) else {
            panic!("kernel {k:?} ({}) has no test `{name}` in tests/gpu_shapes.rs", k.name());
        };
        let body = &rest[..rest.find("\n}\n").unwrap_or(rest.len())];
        assert!(
            body.contains(&format!("Dispatch::Force(Kernel::{k:?})")) && body.contains(&format!("\"{name}\"")),
            "`{name}` must run the shapes with {k:?} forced, its generator seeded by its name:\n{body}"
        );
    }
}

/// [`run_shapes`] for a skinny kernel, its handle asking for the kernel's precision, every fourth
/// triple with a workspace (a forced kernel repacks unaligned rows into it): the triples with
/// M ≤ 8 (16) run, the others are refused with the crate's reason.
fn run_shapes_skinny(g: &Gpu, dispatch: Dispatch, test: &str) {
    let kernel = kernel_of(dispatch);
    assert_eq!(kernel.family(), Family::Skinny, "{dispatch:?}");
    let (ran, refused, _) =
        run_shapes_with(g, dispatch, test, |i, _, case| case.precision(kernel.precision()).workspace(i % 4 == 1));
    if g.gemm.wave(kernel) > 0 {
        assert!(ran > 0 && refused > 0, "{test}: {ran} ran, {refused} refused");
    }
}

/// Skips (with a printed line) off sm_90.
#[test]
fn shapes_sm90_skinny_8x16() {
    let Some(g) = common::hopper_gpu("Sm90Skinny8x16") else { return };
    run_shapes_skinny(&g, Dispatch::Force(Kernel::Sm90Skinny8x16), "shapes_sm90_skinny_8x16");
}

/// Skips (with a printed line) off sm_90.
#[test]
fn shapes_sm90_skinny_8x16_trunc() {
    let Some(g) = common::hopper_gpu("Sm90Skinny8x16Trunc") else { return };
    run_shapes_skinny(&g, Dispatch::Force(Kernel::Sm90Skinny8x16Trunc), "shapes_sm90_skinny_8x16_trunc");
}

/// Skips (with a printed line) off sm_90.
#[test]
fn shapes_sm90_skinny_8x16_x3() {
    let Some(g) = common::hopper_gpu("Sm90Skinny8x16Tf32x3") else { return };
    run_shapes_skinny(&g, Dispatch::Force(Kernel::Sm90Skinny8x16Tf32x3), "shapes_sm90_skinny_8x16_x3");
}

/// Skips (with a printed line) off sm_90.
#[test]
fn shapes_sm90_skinny_16x16() {
    let Some(g) = common::hopper_gpu("Sm90Skinny16x16") else { return };
    run_shapes_skinny(&g, Dispatch::Force(Kernel::Sm90Skinny16x16), "shapes_sm90_skinny_16x16");
}

/// Skips (with a printed line) off sm_90.
#[test]
fn shapes_sm90_skinny_16x16_trunc() {
    let Some(g) = common::hopper_gpu("Sm90Skinny16x16Trunc") else { return };
    run_shapes_skinny(&g, Dispatch::Force(Kernel::Sm90Skinny16x16Trunc), "shapes_sm90_skinny_16x16_trunc");
}

/// Skips (with a printed line) off sm_90.
#[test]
fn shapes_sm90_skinny_16x16_x3() {
    let Some(g) = common::hopper_gpu("Sm90Skinny16x16Tf32x3") else { return };
    run_shapes_skinny(&g, Dispatch::Force(Kernel::Sm90Skinny16x16Tf32x3), "shapes_sm90_skinny_16x16_x3");
}

/// [`run_shapes`] for a GEMV kernel (any device), its handle asking for the kernel's precision,
/// every fourth triple with a workspace (a forced kernel repacks unaligned rows into it): the
/// triples with M ≤ its rows run, the others are refused with the crate's reason.
fn run_shapes_gemv(g: &Gpu, dispatch: Dispatch, test: &str) {
    let kernel = kernel_of(dispatch);
    assert_eq!(kernel.family(), Family::Gemv, "{dispatch:?}");
    let (ran, refused, _) =
        run_shapes_with(g, dispatch, test, |i, _, case| case.precision(kernel.precision()).workspace(i % 4 == 1));
    assert!(ran > 0 && refused > 0, "{test}: {ran} ran, {refused} refused");
}

#[test]
fn shapes_sm80_gemv_1x2() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv1x2), "shapes_sm80_gemv_1x2");
}

#[test]
fn shapes_sm80_gemv_1x2_trunc() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv1x2Trunc), "shapes_sm80_gemv_1x2_trunc");
}

#[test]
fn shapes_sm80_gemv_1x2_x3() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv1x2Tf32x3), "shapes_sm80_gemv_1x2_x3");
}

#[test]
fn shapes_sm80_gemv_1x4() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv1x4), "shapes_sm80_gemv_1x4");
}

#[test]
fn shapes_sm80_gemv_1x4_trunc() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv1x4Trunc), "shapes_sm80_gemv_1x4_trunc");
}

#[test]
fn shapes_sm80_gemv_1x4_x3() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv1x4Tf32x3), "shapes_sm80_gemv_1x4_x3");
}

#[test]
fn shapes_sm80_gemv_4x4() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv4x4), "shapes_sm80_gemv_4x4");
}

#[test]
fn shapes_sm80_gemv_4x4_trunc() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv4x4Trunc), "shapes_sm80_gemv_4x4_trunc");
}

#[test]
fn shapes_sm80_gemv_4x4_x3() {
    let Some(g) = common::gpu() else { return };
    run_shapes_gemv(&g, Dispatch::Force(Kernel::Sm80Gemv4x4Tf32x3), "shapes_sm80_gemv_4x4_x3");
}

/// Decoding sizes, where Auto runs the GEMV and skinny kernels: M ≤ 16 against N and K around
/// the 16 rows of W a skinny cluster computes, its 32-wide k-step and every split of K Auto plans
/// (1 to 8 CTAs per cluster), and around the GEMV kernels' 128-wide chunks and tiles of K; dense
/// and strided views (padded rows, offsets, an output with odd stride); with and without bias.
/// Through Auto (which must choose, for each precision, a GEMV kernel for M = 1, or M ≤ 4 with
/// K ≥ 1024, W outside 2²²..2²⁴ elements, and else a skinny one within its limits) and each GEMV and skinny kernel forced.
/// Every case through `common::check`.
#[test]
fn skinny_shapes() {
    let Some(g) = common::hopper_gpu("Sm90Skinny8x16") else { return };
    const MS: [usize; 6] = [1, 2, 5, 8, 9, 16];
    // (N, K): tiny, K tails (K % 32 = 4, 28), a split of 2 (33 × 1024), 3 (768 × 3072), 8 (64 ×
    // 16384), none (3072 × 768, 4096 × 4096), K = 0 (bias alone); for the GEMV kernels, K a
    // chunk and a lane short of the 2048-wide tile (2044) and a ragged last chunk (4100).
    const NKS: [(usize, usize); 11] = [
        (1, 4),
        (15, 28),
        (17, 36),
        (16, 100),
        (33, 1024),
        (768, 3072),
        (1000, 4100),
        (3072, 768),
        (64, 16384),
        (4096, 4096),
        (7, 2044),
    ];
    let mut rng = common::rng("skinny_shapes");
    let start = std::time::Instant::now();
    let (mut checked, mut splits) = (0usize, std::collections::BTreeSet::new());
    let mut i = 0usize;
    for m in MS {
        for (n, k) in NKS.into_iter().chain([(20, 0)]) {
            i += 1;
            let mut case = Case::new(m, n, k).bias(i % 3 != 0).scale(SCALES[i % SCALES.len()]).x_dist(if i % 2 == 0 {
                XDist::Unit
            } else {
                XDist::Sym
            });
            if i % 2 == 1 {
                // Strided: rows padded by 16-byte units, views at 16-byte offsets, out at any.
                case = case.pad(4, 8, 3).offset(4, 8, 1, 1);
            }
            let mut dispatches = vec![
                (Dispatch::Auto, Precision::Tf32),
                (Dispatch::Auto, Precision::Tf32Truncated),
                (Dispatch::Auto, Precision::Tf32x3),
            ];
            for kernel in Kernel::ALL
                .into_iter()
                .filter(|k| matches!(k.family(), Family::Skinny | Family::Gemv) && m <= k.max_m().unwrap() as usize)
            {
                dispatches.push((Dispatch::Force(kernel), kernel.precision()));
            }
            for (dispatch, precision) in dispatches {
                let case = case.dispatch(dispatch).precision(precision);
                let plan = common::check(&g, &case, &mut rng).expect("a non-empty problem ran");
                let w_in_l2 = (1 << 22..1 << 24).contains(&(n * k));
                if dispatch == Dispatch::Auto && !w_in_l2 && (m == 1 || (m <= 4 && k >= 1024)) {
                    assert_eq!(
                        (plan.kernel.family(), plan.precision),
                        (Family::Gemv, precision),
                        "Auto on {case:?}: {plan:?}"
                    );
                } else if dispatch == Dispatch::Auto && n * k <= 1 << 22 {
                    assert_eq!(
                        (plan.kernel.family(), plan.precision),
                        (Family::Skinny, precision),
                        "Auto on {case:?}: {plan:?}"
                    );
                }
                if plan.kernel.family() == Family::Skinny {
                    splits.insert(plan.cluster);
                }
                checked += 1;
            }
        }
    }
    println!("skinny_shapes: {checked} cases checked, splits {splits:?}, {:.1?}", start.elapsed());
    assert!(splits.contains(&1) && splits.contains(&8) && splits.len() >= 4, "splits of K covered: {splits:?}");
}
