//! The sm_90 kernels that round X to nearest in registers and read W as given
//! (`Kernel::needs_rounded_w`: X loaded from the swizzled stage with ldmatrix, half a TF32 ulp
//! added, wgmma with A from registers), proven right bit for bit.
//!
//! Each such kernel K has a truncating twin K_trunc (the same symbol with `_trunc`: same tile,
//! schedule, cluster and launch), which hands the fp32 bits to the tensor cores as TMA wrote
//! them. Fed operands that are TF32 values already, the twin truncates nothing, so
//!
//!   K on (X, W prepared by a `Nearest` handle)  ==  K_trunc on (rna(X), rna(W)), bitwise,
//!
//! where rna is round to nearest, ties away from zero, done on the host — as long as both plan
//! the same grid and stream-K (the same workspace is offered to both, and neither may repack
//! anything, which would round on the device instead). Checked on more than 20 shapes per kernel
//! with M, N and K tails, cluster rows past M (M % 256 in 1..128), split-K and stream-K tails,
//! with ties and mantissa-carrying values salted into the inputs; the first differing element
//! is reported with the seed. Plus: X through an identity W comes out as rna(X) exactly; a handle
//! that truncates gets W read as given (its prepared weight holds W's bits); `prepare_weight`
//! stores rna(W) (this one runs on any GPU, the rest skip off sm_90).
//!
//! And the rounding Auto uses on sm_90, the TMA's on load (TF32 tensor maps,
//! `Plan::round_on_load`): through identities, every element of X and W comes out as rne(X),
//! rne(W) — to nearest, ties to even — for every kernel that can round on load, with M, N and K
//! tails and padded rows; and Auto on raw operands equals the same kernel truncating rne(X) and
//! rne(W) computed on the host (rna(W) for a prepared W, rounded before), bit for bit.

mod common;

use common::{Gpu, Rng};
use gemm_epilogue::cudarc::driver::CudaSlice;
// TF32 to nearest, ties to even: what the TMA writes to shared memory through a TF32 tensor map
// (`the_tma_rounds_on_load_through_identities` pins it down).
use gemm_epilogue::testbed::tf32::tf32_round_even as tf32_rne;
use gemm_epilogue::{Dispatch, Family, FusedGemm, Kernel, MatrixMut, MatrixRef, Plan, Precision, Weight};

/// TF32 to nearest, ties away from zero (`cvt.rna.tf32.f32`), of a finite f32: half a TF32 ulp
/// (bit 12) added to the magnitude, then the 13 bits TF32 drops cleared.
fn tf32_rna(v: f32) -> f32 {
    assert!(v.is_finite(), "rna of {v}");
    f32::from_bits((v.to_bits() + 0x1000) & 0xffff_e000)
}

/// TF32 by truncation: what the tensor cores make of fp32 bits.
fn tf32_trunc(v: f32) -> f32 {
    f32::from_bits(v.to_bits() & 0xffff_e000)
}

/// The host rounding itself (runs without a GPU).
#[test]
fn tf32_rna_rounds_to_nearest_ties_away() {
    let one = 1.0f32;
    let ulp = 2f32.powi(-10); // a TF32 ulp at 1
    assert_eq!(tf32_rna(one), one);
    assert_eq!(tf32_rna(one + ulp / 2.0), one + ulp, "a tie rounds away from zero");
    assert_eq!(tf32_rna(-(one + ulp / 2.0)), -(one + ulp), "a negative tie too");
    assert_eq!(tf32_rna(one + 3.0 * ulp / 2.0), one + 2.0 * ulp, "ties go away, not to even");
    assert_eq!(tf32_rna(f32::from_bits(one.to_bits() + 0x0fff)), one, "below the tie: down");
    assert_eq!(tf32_rna(f32::from_bits(0x3fff_ffff)), 2.0, "a carry into the exponent");
    assert_eq!(tf32_trunc(f32::from_bits(0x3fff_ffff)), f32::from_bits(0x3fff_e000));
    assert_eq!(tf32_rna(0.0).to_bits(), 0);
    assert_eq!(tf32_rna(-0.0).to_bits(), 0x8000_0000);
    for bits in [0x3e99_999au32, 0xbf31_7218, 0x4049_0fdb, 0x0080_0000] {
        let (v, r) = (f32::from_bits(bits), tf32_rna(f32::from_bits(bits)));
        assert_eq!(r.to_bits() & 0x1fff, 0, "{v:e} -> {r:e} is a TF32 value");
        assert!((r as f64 - v as f64).abs() <= (tf32_trunc(v) as f64 - v as f64).abs().max(2f64.powi(-11) * v.abs() as f64), "{v:e} -> {r:e}");
    }
}

/// Makes some inputs the values a rounding can get wrong: exact ties (the 13 dropped bits
/// 0x1000) and values whose 23 mantissa bits are all ones (rounding up carries into the
/// exponent). Normal values only, signs kept.
fn salt(v: &mut [f32], rng: &mut Rng) {
    for x in v.iter_mut().filter(|x| x.is_normal()) {
        match rng.below(64) {
            0 | 1 => *x = f32::from_bits((x.to_bits() & !0x1fff) | 0x1000),
            2 => *x = f32::from_bits(x.to_bits() | 0x007f_ffff),
            _ => {}
        }
    }
}

/// How a shape is scheduled, for the kernels of this file: split-K (every tile shared along K),
/// a stream-K tail (the last, partial wave shared), or whatever the plan says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sched {
    Any,
    SplitK,
    Tail,
}

/// One problem: M × N × K, and how it must be scheduled.
#[derive(Clone, Copy, Debug)]
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    sched: Sched,
}

const fn p(m: usize, n: usize, k: usize, sched: Sched) -> Problem {
    Problem { m, n, k, sched }
}

/// The shapes every kernel runs (K % 4 == 0 throughout, so that nothing is repacked; K tails are
/// tails of the 32-wide k-block). With 128-row and 256-row cluster tiles, M % 256 in 1..128
/// leaves the second CTA of a cluster's last row without a row in range.
const SHAPES: [Problem; 23] = [
    p(1, 1, 4, Sched::Any),             // one element, K below a k-block
    p(1, 4096, 4096, Sched::SplitK),    // M = 1, every tile split along K
    p(7, 33, 36, Sched::Any),           // tails everywhere
    p(8, 16, 16, Sched::Any),
    p(64, 64, 32, Sched::Any),          // one whole 64×64 tile, one k-block
    p(65, 129, 100, Sched::Any),        // M, N and K tails
    p(100, 16384, 96, Sched::Any),      // many narrow tiles; M % 256 = 100
    p(127, 255, 1000, Sched::Any),
    p(128, 128, 4096, Sched::SplitK),   // one or two tiles, 128 k-blocks
    p(129, 1000, 2048, Sched::SplitK),  // split-K with M and N tails; one row in a cluster's second CTA
    p(200, 300, 68, Sched::Any),
    p(255, 257, 260, Sched::Any),
    p(256, 256, 32, Sched::Any),
    p(257, 520, 512, Sched::Any),       // M % 256 = 1
    p(300, 520, 512, Sched::SplitK),    // two parts a tile; M % 256 = 44
    p(300, 136, 68, Sched::Any),
    p(383, 130, 36, Sched::Any),        // M % 256 = 127
    p(513, 200, 100, Sched::Any),       // M % 256 = 1
    p(1000, 1023, 1024, Sched::Any),
    p(1025, 1000, 132, Sched::Any),
    p(2000, 4096, 260, Sched::Any),     // several tiles per persistent CTA
    p(4097, 1025, 68, Sched::Any),      // M % 256 = 1, 17 × 9 cluster tiles
    p(4096, 4096, 128, Sched::Any),     // whole waves
];

/// Two shapes whose (cluster) tiles are 8 waves of `kernel` and a partial one, which stream-K
/// shares: 6 tiles (under a quarter wave, shared with the wave before) and about a third of a
/// wave (shared alone). Two column tiles with an N tail, M with a tail of 17 rows (for a cluster
/// kernel, the second CTA of the last cluster row is empty), K = 100.
fn stream_k_tails(g: &Gpu, kernel: Kernel) -> Vec<Problem> {
    let wave = g.gemm.wave(kernel) as usize;
    assert!(wave > 0, "{kernel:?} has no wave on {:?}", g.gemm.device());
    let (tm, tn, _) = kernel.tile();
    let rows_per_tile = (tm * kernel.cluster_m()) as usize;
    let n = 2 * tn as usize - 3;
    [4 * wave + 3, 4 * wave + wave / 6 + 1]
        .into_iter()
        .map(|tile_rows| p((tile_rows - 1) * rows_per_tile + 17, n, 100, Sched::Tail))
        .collect()
}

/// Cluster tiles of `kernel` on `p` (tiles for a plain kernel).
fn cluster_tiles(kernel: Kernel, p: &Problem) -> u32 {
    let (tm, tn, _) = kernel.tile();
    (p.m.div_ceil((tm * kernel.cluster_m()) as usize) * p.n.div_ceil(tn as usize)) as u32
}

/// The host inputs of a problem, dense, and how the call runs them.
struct Host {
    x: Vec<f32>,
    w: Vec<f32>,
    b: Option<Vec<f32>>,
    scale: f32,
    /// Output stride: N, N + 4 (TMA store where N % 4 == 0) or N + 1 (stores from registers).
    ldo: usize,
}

impl Host {
    /// x ~ U(0,1) or U(−1,1), w, b ~ U(−1/√K, 1/√K), salted ([`salt`]); the `i`-th problem of a
    /// list picks its bias, scale and output stride.
    fn generate(p: &Problem, i: usize, rng: &mut Rng) -> Self {
        let a = 1.0 / (p.k.max(1) as f32).sqrt();
        let mut x = if i % 2 == 0 { common::fill(p.m * p.k, rng, |r| r.unit()) } else { common::fill(p.m * p.k, rng, |r| r.sym(1.0)) };
        let mut w = common::fill(p.n * p.k, rng, |r| a * r.sym(1.0));
        salt(&mut x, rng);
        salt(&mut w, rng);
        let b = (i % 4 != 3).then(|| (0..p.n).map(|_| a * rng.sym(1.0)).collect());
        let scale = [0.5, -2.0, 3.0, 1e-3][i % 4];
        let ldo = [p.n, p.n + 4, p.n + 1][i % 3];
        Self { x, w, b, scale, ldo }
    }
}

/// One fused call of `gemm` into a poisoned `m × n` output of stride `ldo` (with `workspace` when
/// given): the plan and the output, dense, after checking that every element of the view was
/// written and nothing around it.
#[allow(clippy::too_many_arguments)]
fn run<W: Weight>(
    g: &Gpu,
    gemm: &FusedGemm,
    x: &CudaSlice<f32>,
    w: &W,
    b: Option<&CudaSlice<f32>>,
    (m, n, k): (usize, usize, usize),
    scale: f32,
    ldo: usize,
    workspace: Option<&mut CudaSlice<f32>>,
) -> (Plan, Vec<f32>) {
    run_view(g, gemm, MatrixRef::from_slice(x, m, k), w, b, n, scale, ldo, workspace)
}

/// [`run`] with X as a view (any leading dimension).
#[allow(clippy::too_many_arguments)]
fn run_view<W: Weight>(
    g: &Gpu,
    gemm: &FusedGemm,
    xv: MatrixRef<'_>,
    w: &W,
    b: Option<&CudaSlice<f32>>,
    n: usize,
    scale: f32,
    ldo: usize,
    workspace: Option<&mut CudaSlice<f32>>,
) -> (Plan, Vec<f32>) {
    let (m, k) = (xv.rows(), xv.cols());
    let bv = b.map(|b| b.as_view());
    let len = common::extent(m, n, ldo);
    let mut out = g.stream.clone_htod(&common::poisoned(len + common::TAIL)).expect("upload poison");
    let plan = {
        let mut o = MatrixMut::with_ld(out.slice_mut(0..len), m, n, ldo);
        match workspace {
            Some(ws) => gemm.run_with_workspace(&g.stream, &xv, w, bv.as_ref(), scale, &mut o, &mut ws.as_view_mut()),
            None => gemm.run(&g.stream, &xv, w, bv.as_ref(), scale, &mut o),
        }
        .unwrap_or_else(|e| panic!("{:?} on {m}x{n}x{k} failed: {e}", gemm.dispatch()))
        .expect("a non-empty problem")
    };
    let host = g.stream.clone_dtoh(&out).expect("download out");
    let dense = common::take_view_checked(&host, 0, m, n, ldo, &format!("{plan:?} on {m}x{n}x{k}"));
    (plan, dense)
}

/// `got` and `want` (both `n` columns wide) must be bitwise equal; else fails with the first
/// differing element, how many differ, and the seed.
fn assert_bitwise(got: &[f32], want: &[f32], n: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let differ = |(a, b): (&f32, &f32)| a.to_bits() != b.to_bits();
    if let Some(i) = got.iter().zip(want).position(differ) {
        let count = got.iter().zip(want).filter(|&e| differ(e)).count();
        panic!(
            "{what}: {count} of {} elements differ; the first, (row {}, col {}): {:e} ({:#010x}), want {:e} ({:#010x}); GEMM_EPILOGUE_SEED={:#x}",
            got.len(),
            i / n.max(1),
            i % n.max(1),
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits(),
            common::seed()
        );
    }
}

/// The plans of two twins (or of Auto and the twin of its pick) that must compute alike: the
/// same grid, cluster, stream-K and store path, nothing repacked by either, `Nearest` for the
/// rounding kernel and `Truncate` for the truncating one (the crate does not know the host
/// rounded its operands).
fn assert_twin_plans(rounding: &Plan, trunc: &Plan, what: &str) {
    let schedule = |p: &Plan| (p.grid, p.cluster, p.block, p.stream_k_tiles, p.stream_k_ctas, p.tma_store);
    assert_eq!(schedule(rounding), schedule(trunc), "{what}: the twins must plan alike: {rounding:?} vs {trunc:?}");
    for p in [rounding, trunc] {
        assert!(!p.repack_x && !p.repack_w, "{what}: nothing may be repacked (it would round on the device): {p:?}");
    }
    assert_eq!((rounding.precision, trunc.precision), (Precision::Tf32, Precision::Tf32Truncated), "{what}: {rounding:?} vs {trunc:?}");
    assert_eq!(common::trunc_twin(rounding.kernel), Some(trunc.kernel), "{what}");
}

/// The heart of this file for one rounding kernel: X through an identity W, then every shape
/// against the truncating twin (with a shared workspace, and every third shape without one too).
fn register_rounding(g: &Gpu, kernel: Kernel, test: &str) {
    let twin = common::trunc_twin(kernel).unwrap_or_else(|| panic!("{kernel:?} has no truncating twin"));
    assert!(kernel.needs_rounded_w() && kernel.family() == Family::TmaWgmma, "{kernel:?}");
    let mut rng = common::rng(test);
    let nearest = g.gemm.with_precision(Precision::Tf32);
    // The twin under a truncating handle: fp32 tensor maps, nothing rounded on load.
    let truncating = g.gemm.with_precision(Precision::Tf32Truncated);
    let (kg, tg) = (nearest.with_dispatch(Dispatch::Force(kernel)), truncating.with_dispatch(Dispatch::Force(twin)));

    // X through an identity W (N = K, no bias, scale 0: out = v exactly, one product 1·x̂ per
    // element): the output is X as the kernel rounded it, which must be rna(X).
    {
        let (m, k) = (300, 260);
        let mut x = common::fill(m * k, &mut rng, |r| r.sym(1.0));
        salt(&mut x, &mut rng);
        let eye: Vec<f32> = (0..k * k).map(|i| if i / k == i % k { 1.0 } else { 0.0 }).collect();
        let (xd, wd) = (g.stream.clone_htod(&x).unwrap(), g.stream.clone_htod(&eye).unwrap());
        let prepared = kg.prepare_weight(&g.stream, &MatrixRef::from_slice(&wd, k, k)).expect("prepare_weight");
        let (plan, out) = run(g, &kg, &xd, &prepared, None, (m, k, k), 0.0, k, None);
        assert_eq!((plan.kernel, plan.precision, plan.repack_x, plan.repack_w), (kernel, Precision::Tf32, false, false), "{plan:?}");
        let want: Vec<f32> = x.iter().copied().map(tf32_rna).collect();
        assert_bitwise(&out, &want, k, &format!("{kernel:?}: X ({m}x{k}) through an identity W must come out rounded to nearest, ties away"));
    }

    let mut problems = SHAPES.to_vec();
    problems.extend(stream_k_tails(g, kernel));
    assert!(problems.len() >= 20);
    for (i, pb) in problems.iter().enumerate() {
        let (m, n, k) = (pb.m, pb.n, pb.k);
        let h = Host::generate(pb, i, &mut rng);
        let xr: Vec<f32> = h.x.iter().copied().map(tf32_rna).collect();
        let wr: Vec<f32> = h.w.iter().copied().map(tf32_rna).collect();
        let up = |v: &[f32]| g.stream.clone_htod(v).expect("upload");
        let (x, w, xr, wr) = (up(&h.x), up(&h.w), up(&xr), up(&wr));
        let b = h.b.as_deref().map(up);
        let prepared = kg.prepare_weight(&g.stream, &MatrixRef::from_slice(&w, n, k)).expect("prepare_weight");
        let wr = MatrixRef::from_slice(&wr, n, k);
        // One workspace for both, as long as either asks: the same room, so the same stream-K.
        let lens = (
            kg.workspace_len(&g.stream, &MatrixRef::from_slice(&x, m, k), &prepared).expect("workspace_len"),
            tg.workspace_len(&g.stream, &MatrixRef::from_slice(&xr, m, k), &wr).expect("workspace_len"),
        );
        assert_eq!(lens.0, lens.1, "{kernel:?} and {twin:?} on {m}x{n}x{k} must ask for the same workspace");
        let mut ws = g.stream.clone_htod(&common::poisoned(lens.0.max(1))).expect("upload workspace");
        let what = format!("{kernel:?} on (X, prepared W) vs {twin:?} on (rna(X), rna(W)), {m}x{n}x{k}, ldo {}, scale {}, bias {}", h.ldo, h.scale, h.b.is_some());
        let (pk, ok) = run(g, &kg, &x, &prepared, b.as_ref(), (m, n, k), h.scale, h.ldo, Some(&mut ws));
        let (pt, ot) = run(g, &tg, &xr, &wr, b.as_ref(), (m, n, k), h.scale, h.ldo, Some(&mut ws));
        assert_twin_plans(&pk, &pt, &what);
        let tiles = cluster_tiles(kernel, pb);
        match pb.sched {
            Sched::SplitK => assert_eq!(pk.stream_k_tiles, tiles, "{what}: split-K shares every tile: {pk:?}"),
            Sched::Tail => assert!(pk.stream_k_tiles > 0 && pk.stream_k_tiles < tiles, "{what}: a shared tail of {tiles} tiles: {pk:?}"),
            Sched::Any => {}
        }
        assert_bitwise(&ok, &ot, n, &what);
        println!("{m}x{n}x{k}: bitwise equal, {pk:?}");
        if i % 3 == 0 {
            // Without a workspace: the plain persistent schedule.
            let (pk, ok) = run(g, &kg, &x, &prepared, b.as_ref(), (m, n, k), h.scale, h.ldo, None);
            let (pt, ot) = run(g, &tg, &xr, &wr, b.as_ref(), (m, n, k), h.scale, h.ldo, None);
            assert_twin_plans(&pk, &pt, &format!("{what}, no workspace"));
            assert_eq!(pk.stream_k_tiles, 0, "{pk:?}");
            assert_bitwise(&ok, &ot, n, &format!("{what}, no workspace"));
        }
    }
}

#[test]
fn register_rounding_sm90_pingpong_128x128() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128") else { return };
    register_rounding(&g, Kernel::Sm90Pingpong128x128, "register_rounding_sm90_pingpong_128x128");
}

#[test]
fn register_rounding_sm90_pingpong_64x128() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x128") else { return };
    register_rounding(&g, Kernel::Sm90Pingpong64x128, "register_rounding_sm90_pingpong_64x128");
}

#[test]
fn register_rounding_sm90_pingpong_64x64() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x64") else { return };
    register_rounding(&g, Kernel::Sm90Pingpong64x64, "register_rounding_sm90_pingpong_64x64");
}

#[test]
fn register_rounding_sm90_pingpong_128x128_cluster2() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128Cluster2") else { return };
    register_rounding(&g, Kernel::Sm90Pingpong128x128Cluster2, "register_rounding_sm90_pingpong_128x128_cluster2");
}

#[test]
fn register_rounding_sm90_cooperative_128x256() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256") else { return };
    register_rounding(&g, Kernel::Sm90Cooperative128x256, "register_rounding_sm90_cooperative_128x256");
}

#[test]
fn register_rounding_sm90_cooperative_128x256_cluster2() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256Cluster2") else { return };
    register_rounding(&g, Kernel::Sm90Cooperative128x256Cluster2, "register_rounding_sm90_cooperative_128x256_cluster2");
}

/// The `register_rounding_*` test of a kernel: its symbol without `ge_`, the tile's K and the
/// stage count (`ge_sm90_pingpong_64x128x32_s8` → `register_rounding_sm90_pingpong_64x128`).
fn test_name(kernel: Kernel) -> String {
    let (tm, tn, tk) = kernel.tile();
    let stages = |p: &str| p.len() > 1 && p.starts_with('s') && p[1..].bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<String> = kernel
        .name()
        .strip_prefix("ge_")
        .unwrap_or_else(|| panic!("{} does not start with ge_", kernel.name()))
        .split('_')
        .filter(|p| !stages(p))
        .map(|p| if p == format!("{tm}x{tn}x{tk}") { format!("{tm}x{tn}") } else { p.to_string() })
        .collect();
    format!("register_rounding_{}", parts.join("_"))
}

/// Every kernel that reads W rounded (exactly the TMA kernels that round) has its
/// `register_rounding_*` test above, and a truncating twin that launches alike (runs without a
/// GPU).
#[test]
fn every_rounding_kernel_has_a_twin_and_a_test() {
    let source = include_str!("gpu_rounding.rs");
    let readers = common::rounding_w_readers();
    assert_eq!(readers.len(), 6, "{readers:?}");
    for k in Kernel::ALL {
        assert_eq!(k.needs_rounded_w(), k.family() == Family::TmaWgmma && k.precision() == Precision::Tf32, "{k:?}");
    }
    for k in readers {
        let twin = common::trunc_twin(k).unwrap_or_else(|| panic!("{k:?} has no truncating twin"));
        assert_eq!(common::rounding_twin(twin), Some(k));
        let name = test_name(k);
        assert!(
            source.contains(&format!("#[test]\nfn {name}() {{\n")) && source.contains(&format!("register_rounding(&g, Kernel::{k:?}, \"{name}\")")),
            "{k:?} has no test `{name}` in tests/gpu_rounding.rs"
        );
    }
    assert_eq!(test_name(Kernel::Sm90Pingpong64x128), "register_rounding_sm90_pingpong_64x128");
    assert_eq!(test_name(Kernel::Sm90Cooperative128x256Cluster2), "register_rounding_sm90_cooperative_128x256_cluster2");
}

/// Auto with the default `Tf32` on sm_90 runs a kernel fed from shared memory through TF32
/// tensor maps: the TMA rounds X and W as it loads them (`Plan::round_on_load`), to nearest with
/// ties to even. On the shapes of this file (salted with ties and carries), Auto on the raw X
/// and W (every other pair of shapes: W prepared, so rounded ties away before) equals the same
/// kernel under a truncating handle (fp32 maps) on rne(X) and rne(W) (rna(W)) computed on the
/// host, bit for bit, with the same workspace (even shapes) or none (odd shapes).
#[test]
fn auto_rounds_on_load_as_the_host_rounds() {
    let Some(g) = common::hopper_gpu("rounding on load (TF32 tensor maps)") else { return };
    let mut rng = common::rng("auto_rounds_on_load_as_the_host_rounds");
    assert_eq!(g.gemm.precision(), Precision::Tf32, "the default rounding");
    let auto = &g.gemm;
    let truncating = g.gemm.with_precision(Precision::Tf32Truncated);
    let mut picked = std::collections::BTreeSet::new();
    for (i, pb) in SHAPES.iter().enumerate() {
        let (m, n, k) = (pb.m, pb.n, pb.k);
        let h = Host::generate(pb, i, &mut rng);
        // The TMA rounds ties to even; a prepared W was rounded ties away before it.
        let prepared_w = i % 4 >= 2;
        let xr: Vec<f32> = h.x.iter().copied().map(tf32_rne).collect();
        let wr: Vec<f32> = h.w.iter().copied().map(if prepared_w { tf32_rna } else { tf32_rne }).collect();
        let up = |v: &[f32]| g.stream.clone_htod(v).expect("upload");
        let (x, w, xr, wr) = (up(&h.x), up(&h.w), up(&xr), up(&wr));
        let b = h.b.as_deref().map(up);
        let wv = MatrixRef::from_slice(&w, n, k);
        let mut ws = (i % 2 == 0).then(|| {
            let len = auto.workspace_len(&g.stream, &MatrixRef::from_slice(&x, m, k), &wv).expect("workspace_len");
            g.stream.clone_htod(&common::poisoned(len.max(1))).expect("upload workspace")
        });
        let (pa, oa) = if !prepared_w {
            run(&g, auto, &x, &wv, b.as_ref(), (m, n, k), h.scale, h.ldo, ws.as_mut())
        } else {
            let prepared = auto.prepare_weight(&g.stream, &wv).expect("prepare_weight");
            run(&g, auto, &x, &prepared, b.as_ref(), (m, n, k), h.scale, h.ldo, ws.as_mut())
        };
        assert!(pa.round_on_load && pa.kernel.can_round_on_load(), "Auto on sm_90 rounds on load: {pa:?}");
        assert_eq!((pa.precision, pa.repack_x, pa.repack_w), (Precision::Tf32, false, false), "{pa:?}");
        let forced = truncating.with_dispatch(Dispatch::Force(pa.kernel));
        let (pt, ot) = run(&g, &forced, &xr, &MatrixRef::from_slice(&wr, n, k), b.as_ref(), (m, n, k), h.scale, h.ldo, ws.as_mut());
        let what = format!("Auto ({:?}, round on load) on (X, W) vs the same kernel truncating rne(X), rne(W) (rna(W) prepared), {m}x{n}x{k}, workspace {}", pa.kernel, ws.is_some());
        let schedule = |p: &Plan| (p.kernel, p.grid, p.cluster, p.stream_k_tiles, p.stream_k_ctas, p.tma_store);
        assert_eq!(schedule(&pa), schedule(&pt), "{what}: {pa:?} vs {pt:?}");
        assert_eq!((pt.precision, pt.round_on_load, pt.repack_x, pt.repack_w), (Precision::Tf32Truncated, false, false, false), "{what}: {pt:?}");
        assert_bitwise(&oa, &ot, n, &what);
        println!("{m}x{n}x{k}: bitwise equal, {pa:?}");
        picked.insert(format!("{:?}", pa.kernel));
    }
    println!("Auto picked {picked:?}");
    assert!(picked.len() >= 3, "the shapes should reach several of Auto's TMA kernels: {picked:?}");
}

/// The TMA's rounding on load, element by element: every kernel that can round on load, forced
/// under a `Tf32` handle (TF32 tensor maps), multiplies X (with padded rows, the padding NaN)
/// by an identity W, and an identity X by W (strided too), so that the output is each operand
/// exactly as the TMA wrote it to shared memory. Shapes with M, N and K tails (boxes that stop
/// at M, N and K), salted with ties of both parities and carries. Every element must be
/// rne(v); the counts of elements that match rna and trunc instead are printed.
#[test]
fn the_tma_rounds_on_load_through_identities() {
    let Some(g) = common::hopper_gpu("rounding on load (TF32 tensor maps)") else { return };
    let mut rng = common::rng("the_tma_rounds_on_load_through_identities");
    let nearest = g.gemm.with_precision(Precision::Tf32);
    let mut bad = Vec::new();
    let eye = |k: usize| -> Vec<f32> { (0..k * k).map(|i| if i / k == i % k { 1.0 } else { 0.0 }).collect() };
    for kernel in Kernel::ALL.into_iter().filter(|k| k.can_round_on_load()) {
        let gemm = nearest.with_dispatch(Dispatch::Force(kernel));
        for &(rows, k, pad) in &[(1usize, 4usize, 0usize), (8, 16, 4), (63, 16, 4), (65, 16, 0), (64, 32, 0), (65, 36, 4), (130, 68, 4), (300, 260, 0)] {
            let ld = k + pad;
            let mut v = common::fill(rows * ld, &mut rng, |r| r.sym(1.0));
            for (i, e) in v.iter_mut().enumerate() {
                if i % ld >= k {
                    *e = f32::NAN;
                } else {
                    *e = match rng.below(8) {
                        0 | 1 => f32::from_bits((e.to_bits() & !0x1fff) | 0x1000),
                        2 => f32::from_bits((e.to_bits() & !0x3fff) | 0x3000),
                        3 => f32::from_bits(e.to_bits() | 0x007f_ffff),
                        _ => *e,
                    };
                }
            }
            let vd = g.stream.clone_htod(&v).expect("upload");
            let id = g.stream.clone_htod(&eye(k)).expect("upload");
            for operand in ["X", "W"] {
                let view = MatrixRef::with_ld(vd.slice(..), rows, k, ld);
                let (plan, out) = if operand == "X" {
                    run_view(&g, &gemm, view, &MatrixRef::from_slice(&id, k, k), None, k, 0.0, k, None)
                } else {
                    run_view(&g, &gemm, MatrixRef::from_slice(&id, k, k), &view, None, rows, 0.0, rows, None)
                };
                assert!(plan.round_on_load && plan.kernel == kernel && !plan.repack_x && !plan.repack_w, "{plan:?}");
                // out[i][j] is the operand's element (i, j) for X, (j, i) for W.
                let (mut n_rne, mut n_rna, mut n_trunc, mut ties, mut first) = (0, 0, 0, 0, None);
                for r in 0..rows {
                    for c in 0..k {
                        let e = v[r * ld + c];
                        let got = if operand == "X" { out[r * k + c] } else { out[c * rows + r] };
                        ties += (e.to_bits() & 0x1fff == 0x1000) as usize;
                        n_rne += (got == tf32_rne(e)) as usize;
                        n_rna += (got == tf32_rna(e)) as usize;
                        n_trunc += (got == tf32_trunc(e)) as usize;
                        if got != tf32_rne(e) && first.is_none() {
                            first = Some((r, c, e.to_bits(), got.to_bits()));
                        }
                    }
                }
                let line = format!("{kernel:?} {operand} {rows}x{k} ld {ld}: {} elements ({ties} ties): rne {n_rne}, rna {n_rna}, trunc {n_trunc}; first not rne (row, col, in, out) {first:x?}", rows * k);
                println!("{line}");
                if n_rne != rows * k {
                    bad.push(line);
                }
            }
        }
    }
    assert!(bad.is_empty(), "the TMA did not round these to nearest-even:\n{}", bad.join("\n"));
}

/// The rounding kernels round X themselves and read W as it is given, so a call never hands
/// them an unrounded W: forced on a weight prepared by a truncating handle (its bits as they
/// were), with a workspace, they round W into it first (`repack_w`) and must compute exactly
/// what their truncating twin computes on rna(X) and rna(W) — and the plan says `Nearest`.
#[test]
fn rounding_kernels_round_an_unrounded_prepared_w_first() {
    let Some(g) = common::hopper_gpu("the rounding TMA kernels") else { return };
    let mut rng = common::rng("rounding_kernels_round_an_unrounded_prepared_w_first");
    let truncating = g.gemm.with_precision(Precision::Tf32Truncated);
    let shapes = [p(300, 520, 512, Sched::SplitK), p(129, 1000, 100, Sched::Any), p(1000, 1023, 1024, Sched::Any)];
    for kernel in common::rounding_w_readers() {
        let twin = common::trunc_twin(kernel).expect("a truncating twin");
        let (kg, tg) = (truncating.with_dispatch(Dispatch::Force(kernel)), truncating.with_dispatch(Dispatch::Force(twin)));
        for (i, pb) in shapes.iter().enumerate() {
            let (m, n, k) = (pb.m, pb.n, pb.k);
            let h = Host::generate(pb, i, &mut rng);
            let xr: Vec<f32> = h.x.iter().copied().map(tf32_rna).collect();
            let wr: Vec<f32> = h.w.iter().copied().map(tf32_rna).collect();
            let up = |v: &[f32]| g.stream.clone_htod(v).expect("upload");
            let (x, w, xr, wr) = (up(&h.x), up(&h.w), up(&xr), up(&wr));
            let b = h.b.as_deref().map(up);
            let prepared = kg.prepare_weight(&g.stream, &MatrixRef::from_slice(&w, n, k)).expect("prepare_weight");
            assert_eq!(prepared.precision(), Precision::Tf32Truncated);
            let wv = MatrixRef::from_slice(&wr, n, k);
            let len = kg.workspace_len(&g.stream, &MatrixRef::from_slice(&x, m, k), &prepared).expect("workspace_len");
            let mut ws = g.stream.clone_htod(&common::poisoned(len.max(1))).expect("upload workspace");
            let (pk, ok) = run(&g, &kg, &x, &prepared, b.as_ref(), (m, n, k), h.scale, h.ldo, Some(&mut ws));
            let (pt, ot) = run(&g, &tg, &xr, &wv, b.as_ref(), (m, n, k), h.scale, h.ldo, Some(&mut ws));
            let what = format!("{kernel:?} on (X, W prepared by a truncating handle) vs {twin:?} on (rna(X), rna(W)), {m}x{n}x{k}");
            let schedule = |p: &Plan| (p.grid, p.stream_k_tiles, p.stream_k_ctas);
            assert_eq!(schedule(&pk), schedule(&pt), "{what}: {pk:?} vs {pt:?}");
            assert!(!pk.repack_x && pk.repack_w, "{what}: W must be rounded into the workspace first: {pk:?}");
            assert_bitwise(&ok, &ot, n, &what);
            assert_eq!(pk.precision, Precision::Tf32, "{what}: X and W reached the tensor cores rounded: {pk:?}");
        }
    }
}

/// `prepare_weight` stores W rounded to TF32 to nearest, ties away (a `Nearest` handle), or W's
/// bits as they were (`Truncate`). Read back exactly through an identity X (out = X·Wᵀ = Wᵀ, one
/// product 1·ŵ per element, no bias, scale 0) by a truncating kernel, which adds nothing of its
/// own: the output is rna(W)ᵀ, or trunc(W)ᵀ. Runs on any GPU (the mma.sync truncating kernel),
/// and on sm_90 with the truncating TMA kernel too.
#[test]
fn prepare_weight_rounds_to_nearest_ties_away() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("prepare_weight_rounds_to_nearest_ties_away");
    let mut kernels = vec![Kernel::Sm80Mma128x128Vec4Trunc];
    if g.is_hopper() {
        kernels.push(Kernel::Sm90Pingpong64x64Trunc);
    }
    for (n, k) in [(130, 68), (64, 100)] {
        let mut w = common::fill(n * k, &mut rng, |r| r.sym(1.0));
        salt(&mut w, &mut rng);
        let eye: Vec<f32> = (0..k * k).map(|i| if i / k == i % k { 1.0 } else { 0.0 }).collect();
        let (xd, wd) = (g.stream.clone_htod(&eye).unwrap(), g.stream.clone_htod(&w).unwrap());
        for (precision, f) in [(Precision::Tf32, tf32_rna as fn(f32) -> f32), (Precision::Tf32Truncated, tf32_trunc)] {
            for &kernel in &kernels {
                if g.gemm.wave(kernel) == 0 {
                    println!("{kernel:?} cannot run here");
                    continue;
                }
                let gemm = g.gemm.with_precision(precision).with_dispatch(Dispatch::Force(kernel));
                let prepared = gemm.prepare_weight(&g.stream, &MatrixRef::from_slice(&wd, n, k)).expect("prepare_weight");
                assert_eq!((prepared.rows(), prepared.cols(), prepared.ld(), prepared.precision()), (n, k, k.next_multiple_of(32), precision));
                let (plan, out) = run(&g, &gemm, &xd, &prepared, None, (k, n, k), 0.0, n, None);
                // The TMA kernel under the rounding handle rounds on load: W prepared rounded
                // comes through unchanged (rounding is idempotent), and the identity X is exact.
                let on_load = kernel.can_round_on_load() && precision == Precision::Tf32;
                assert_eq!((plan.kernel, plan.precision, plan.round_on_load), (kernel, if on_load { Precision::Tf32 } else { Precision::Tf32Truncated }, on_load), "{plan:?}");
                // out[i][j] = W[j][i], as prepared.
                let want: Vec<f32> = (0..k * n).map(|e| f(w[(e % n) * k + e / n])).collect();
                assert_bitwise(&out, &want, n, &format!("W ({n}x{k}) prepared by a {precision:?} handle, read back through an identity X by {kernel:?} (row i, col j = W[j][i])"));
            }
        }
    }
}
