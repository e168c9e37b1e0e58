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
//! The rounding Auto uses on sm_90, the TMA's on load, is tested in tests/gpu_round_on_load.rs.

mod common;

use common::rounding::{identity, p, run, salt, tf32_rna, tf32_trunc, Host, Problem, Sched, SHAPES};
use common::Gpu;
use gemm_epilogue::{Dispatch, Family, Kernel, MatrixRef, Plan, Precision};

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
        assert!(
            (r as f64 - v as f64).abs() <= (tf32_trunc(v) as f64 - v as f64).abs().max(2f64.powi(-11) * v.abs() as f64),
            "{v:e} -> {r:e}"
        );
    }
}

/// Two shapes whose (cluster) tiles are 8 waves of `kernel` and a partial one, which stream-K
/// shares: 6 tiles (under a quarter wave, shared with the wave before) and about a third of a
/// wave (shared alone). Two column tiles with an N tail, M with a tail of 17 rows (for a cluster
/// kernel, the second CTA of the last cluster row is empty), K = 1540 (49 k-blocks, the last
/// partial: the TMA kernels share no tail of tiles under 48, src/gemm/stream_k.rs).
fn stream_k_tails(g: &Gpu, kernel: Kernel) -> Vec<Problem> {
    let wave = g.gemm.wave(kernel) as usize;
    assert!(wave > 0, "{kernel:?} has no wave on {:?}", g.gemm.device());
    let (tm, tn, _) = kernel.tile();
    let rows_per_tile = (tm * kernel.cluster_m()) as usize;
    let n = 2 * tn as usize - 3;
    [4 * wave + 3, 4 * wave + wave / 6 + 1]
        .into_iter()
        .map(|tile_rows| p((tile_rows - 1) * rows_per_tile + 17, n, 1540, Sched::Tail))
        .collect()
}

/// Cluster tiles of `kernel` on `p` (tiles for a plain kernel).
fn cluster_tiles(kernel: Kernel, p: &Problem) -> u32 {
    let (tm, tn, _) = kernel.tile();
    (p.m.div_ceil((tm * kernel.cluster_m()) as usize) * p.n.div_ceil(tn as usize)) as u32
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
    assert_eq!(
        (rounding.precision, trunc.precision),
        (Precision::Tf32, Precision::Tf32Truncated),
        "{what}: {rounding:?} vs {trunc:?}"
    );
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
        let eye = identity(k);
        let (xd, wd) = (g.stream.clone_htod(&x).unwrap(), g.stream.clone_htod(&eye).unwrap());
        let prepared = kg.prepare_weight(&g.stream, &MatrixRef::from_slice(&wd, k, k)).expect("prepare_weight");
        let (plan, out) = run(g, &kg, &xd, &prepared, None, (m, k, k), 0.0, k, None);
        assert_eq!(
            (plan.kernel, plan.precision, plan.repack_x, plan.repack_w),
            (kernel, Precision::Tf32, false, false),
            "{plan:?}"
        );
        let want: Vec<f32> = x.iter().copied().map(tf32_rna).collect();
        common::assert_bitwise(
            &out,
            &want,
            k,
            &format!("{kernel:?}: X ({m}x{k}) through an identity W must come out rounded to nearest, ties away"),
        );
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
        let what = format!(
            "{kernel:?} on (X, prepared W) vs {twin:?} on (rna(X), rna(W)), {m}x{n}x{k}, ldo {}, scale {}, bias {}",
            h.ldo,
            h.scale,
            h.b.is_some()
        );
        let (pk, ok) = run(g, &kg, &x, &prepared, b.as_ref(), (m, n, k), h.scale, h.ldo, Some(&mut ws));
        let (pt, ot) = run(g, &tg, &xr, &wr, b.as_ref(), (m, n, k), h.scale, h.ldo, Some(&mut ws));
        assert_twin_plans(&pk, &pt, &what);
        let tiles = cluster_tiles(kernel, pb);
        match pb.sched {
            Sched::SplitK => assert_eq!(pk.stream_k_tiles, tiles, "{what}: split-K shares every tile: {pk:?}"),
            Sched::Tail => assert!(
                pk.stream_k_tiles > 0 && pk.stream_k_tiles < tiles,
                "{what}: a shared tail of {tiles} tiles: {pk:?}"
            ),
            Sched::Any => {}
        }
        common::assert_bitwise(&ok, &ot, n, &what);
        println!("{m}x{n}x{k}: bitwise equal, {pk:?}");
        if i % 3 == 0 {
            // Without a workspace: the plain persistent schedule.
            let (pk, ok) = run(g, &kg, &x, &prepared, b.as_ref(), (m, n, k), h.scale, h.ldo, None);
            let (pt, ot) = run(g, &tg, &xr, &wr, b.as_ref(), (m, n, k), h.scale, h.ldo, None);
            assert_twin_plans(&pk, &pt, &format!("{what}, no workspace"));
            assert_eq!(pk.stream_k_tiles, 0, "{pk:?}");
            common::assert_bitwise(&ok, &ot, n, &format!("{what}, no workspace"));
        }
    }
}

#[test]
fn register_rounding_sm90_pingpong_128x128_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128RmemA") else { return };
    register_rounding(&g, Kernel::Sm90Pingpong128x128RmemA, "register_rounding_sm90_pingpong_128x128_rmem_a");
}

#[test]
fn register_rounding_sm90_pingpong_64x128_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x128RmemA") else { return };
    register_rounding(&g, Kernel::Sm90Pingpong64x128RmemA, "register_rounding_sm90_pingpong_64x128_rmem_a");
}

#[test]
fn register_rounding_sm90_pingpong_64x64_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong64x64RmemA") else { return };
    register_rounding(&g, Kernel::Sm90Pingpong64x64RmemA, "register_rounding_sm90_pingpong_64x64_rmem_a");
}

#[test]
fn register_rounding_sm90_pingpong_128x128_cluster2_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Pingpong128x128Cluster2RmemA") else { return };
    register_rounding(
        &g,
        Kernel::Sm90Pingpong128x128Cluster2RmemA,
        "register_rounding_sm90_pingpong_128x128_cluster2_rmem_a",
    );
}

#[test]
fn register_rounding_sm90_cooperative_128x256_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256RmemA") else { return };
    register_rounding(&g, Kernel::Sm90Cooperative128x256RmemA, "register_rounding_sm90_cooperative_128x256_rmem_a");
}

#[test]
fn register_rounding_sm90_cooperative_128x256_cluster2_rmem_a() {
    let Some(g) = common::hopper_gpu("Sm90Cooperative128x256Cluster2RmemA") else { return };
    register_rounding(
        &g,
        Kernel::Sm90Cooperative128x256Cluster2RmemA,
        "register_rounding_sm90_cooperative_128x256_cluster2_rmem_a",
    );
}

/// The `register_rounding_*` test of a kernel: its symbol without `ge_`, the tile's K and the
/// stage count (`ge_sm90_pingpong_64x128x32_s8_rmem_a` → `register_rounding_sm90_pingpong_64x128_rmem_a`).
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
    // Compared without whitespace (and a call's trailing comma): rustfmt may break a call over
    // lines.
    let squeeze = |s: &str| s.split_whitespace().collect::<String>().replace(",)", ")");
    let source = squeeze(include_str!("gpu_rounding.rs"));
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
            source.contains(&squeeze(&format!("#[test]\nfn {name}() {{\n")))
                && source.contains(&squeeze(&format!("register_rounding(&g, Kernel::{k:?}, \"{name}\")"))),
            "{k:?} has no test `{name}` in tests/gpu_rounding.rs"
        );
    }
    assert_eq!(test_name(Kernel::Sm90Pingpong64x128RmemA), "register_rounding_sm90_pingpong_64x128_rmem_a");
    assert_eq!(
        test_name(Kernel::Sm90Cooperative128x256Cluster2RmemA),
        "register_rounding_sm90_cooperative_128x256_cluster2_rmem_a"
    );
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
    let shapes = [p(300, 520, 2048, Sched::SplitK), p(129, 1000, 100, Sched::Any), p(1000, 1023, 1024, Sched::Any)];
    for kernel in common::rounding_w_readers() {
        let twin = common::trunc_twin(kernel).expect("a truncating twin");
        let (kg, tg) =
            (truncating.with_dispatch(Dispatch::Force(kernel)), truncating.with_dispatch(Dispatch::Force(twin)));
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
            let what = format!(
                "{kernel:?} on (X, W prepared by a truncating handle) vs {twin:?} on (rna(X), rna(W)), {m}x{n}x{k}"
            );
            let schedule = |p: &Plan| (p.grid, p.stream_k_tiles, p.stream_k_ctas);
            assert_eq!(schedule(&pk), schedule(&pt), "{what}: {pk:?} vs {pt:?}");
            assert!(!pk.repack_x && pk.repack_w, "{what}: W must be rounded into the workspace first: {pk:?}");
            common::assert_bitwise(&ok, &ot, n, &what);
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
        kernels.push(Kernel::Sm90Pingpong64x64SmemA);
    }
    for (n, k) in [(130, 68), (64, 100)] {
        let mut w = common::fill(n * k, &mut rng, |r| r.sym(1.0));
        salt(&mut w, &mut rng);
        let eye = identity(k);
        let (xd, wd) = (g.stream.clone_htod(&eye).unwrap(), g.stream.clone_htod(&w).unwrap());
        for (precision, f) in [(Precision::Tf32, tf32_rna as fn(f32) -> f32), (Precision::Tf32Truncated, tf32_trunc)] {
            for &kernel in &kernels {
                if g.gemm.wave(kernel) == 0 {
                    println!("{kernel:?} cannot run here");
                    continue;
                }
                let gemm = g.gemm.with_precision(precision).with_dispatch(Dispatch::Force(kernel));
                let prepared =
                    gemm.prepare_weight(&g.stream, &MatrixRef::from_slice(&wd, n, k)).expect("prepare_weight");
                assert_eq!(
                    (prepared.rows(), prepared.cols(), prepared.ld(), prepared.precision()),
                    (n, k, k.next_multiple_of(32), precision)
                );
                let (plan, out) = run(&g, &gemm, &xd, &prepared, None, (k, n, k), 0.0, n, None);
                // The TMA kernel under the rounding handle rounds on load: W prepared rounded
                // comes through unchanged (rounding is idempotent), and the identity X is exact.
                let on_load = kernel.can_round_on_load() && precision == Precision::Tf32;
                assert_eq!(
                    (plan.kernel, plan.precision, plan.round_on_load),
                    (kernel, if on_load { Precision::Tf32 } else { Precision::Tf32Truncated }, on_load),
                    "{plan:?}"
                );
                // out[i][j] = W[j][i], as prepared.
                let want: Vec<f32> = (0..k * n).map(|e| f(w[(e % n) * k + e / n])).collect();
                common::assert_bitwise(&out, &want, n, &format!("W ({n}x{k}) prepared by a {precision:?} handle, read back through an identity X by {kernel:?} (row i, col j = W[j][i])"));
            }
        }
    }
}

/// Runs `kernel` (a `Tf32` build that rounds X and W in registers) on raw operands and its
/// truncating twin on rna(X) and rna(W) (ties and carries salted in) for each of `shapes`, and
/// asserts the two outputs bitwise equal with the same launch; returns each plan's cluster (a
/// skinny kernel's split of K).
fn assert_twin_on_rounded_operands(g: &Gpu, rng: &mut common::Rng, kernel: Kernel, shapes: &[Problem]) -> Vec<u32> {
    let twin = common::trunc_twin(kernel).unwrap_or_else(|| panic!("{kernel:?} has no truncating twin"));
    let kg = g.gemm.with_dispatch(Dispatch::Force(kernel));
    let tg = g.gemm.with_precision(Precision::Tf32Truncated).with_dispatch(Dispatch::Force(twin));
    let mut clusters = Vec::new();
    for (i, pb) in shapes.iter().enumerate() {
        let (m, n, k) = (pb.m, pb.n, pb.k);
        let h = Host::generate(pb, i, rng);
        let xr: Vec<f32> = h.x.iter().copied().map(tf32_rna).collect();
        let wr: Vec<f32> = h.w.iter().copied().map(tf32_rna).collect();
        let up = |v: &[f32]| g.stream.clone_htod(v).expect("upload");
        let (x, w, xr, wr) = (up(&h.x), up(&h.w), up(&xr), up(&wr));
        let b = h.b.as_deref().map(up);
        let what = format!(
            "{kernel:?} on (X, W) vs {twin:?} on (rna(X), rna(W)), {m}x{n}x{k}, ldo {}, scale {}",
            h.ldo, h.scale
        );
        let (pk, ok) = run(g, &kg, &x, &MatrixRef::from_slice(&w, n, k), b.as_ref(), (m, n, k), h.scale, h.ldo, None);
        let (pt, ot) = run(g, &tg, &xr, &MatrixRef::from_slice(&wr, n, k), b.as_ref(), (m, n, k), h.scale, h.ldo, None);
        assert_eq!(
            (pk.kernel, pk.precision, pt.precision),
            (kernel, Precision::Tf32, Precision::Tf32Truncated),
            "{what}"
        );
        assert_eq!((pk.grid, pk.cluster), (pt.grid, pt.cluster), "{what}: the twins must launch alike");
        common::assert_bitwise(&ok, &ot, n, &what);
        clusters.push(pk.cluster);
    }
    println!("{kernel:?}: bitwise equal to {twin:?} on rounded operands, {} shapes", shapes.len());
    clusters
}

/// The skinny kernels of `Tf32` round X and W in registers, to nearest with ties away: each, on
/// the raw operands, computes exactly what its truncating twin computes on rna(X) and rna(W),
/// with the same split of K, on decoding shapes from one element to a split of 8 (64 × 16384)
/// and none (4096 columns).
#[test]
fn skinny_register_rounding() {
    let Some(g) = common::hopper_gpu("the skinny kernels") else { return };
    let mut rng = common::rng("skinny_register_rounding");
    for kernel in Kernel::ALL.into_iter().filter(|k| k.family() == Family::Skinny && k.precision() == Precision::Tf32) {
        let rows = kernel.max_m().expect("a skinny kernel's rows") as usize;
        let shapes = [
            p(1, 1, 4, Sched::Any),
            p(rows, 33, 1024, Sched::Any),
            p(rows / 2 + 1, 768, 3072, Sched::Any),
            p(1, 64, 16384, Sched::Any),
            p(rows, 4096, 1028, Sched::Any),
        ];
        let splits: std::collections::BTreeSet<u32> =
            assert_twin_on_rounded_operands(&g, &mut rng, kernel, &shapes).into_iter().collect();
        assert!(splits.contains(&1) && splits.contains(&8), "{kernel:?}: splits {splits:?}");
    }
}

/// The GEMV kernels of `Tf32` round X and W in registers, to nearest with ties away, then
/// multiply exactly in fp32: each, on the raw operands, computes exactly what its truncating
/// twin computes on rna(X) and rna(W), on shapes from one element to K past its tile with a
/// ragged last chunk (K % 128 != 0) and N not a multiple of its rows.
#[test]
fn gemv_register_rounding() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("gemv_register_rounding");
    let mut ran = 0;
    for kernel in Kernel::ALL.into_iter().filter(|k| k.family() == Family::Gemv && k.precision() == Precision::Tf32) {
        let rows = kernel.max_m().expect("a GEMV kernel's rows") as usize;
        let shapes = [
            p(1, 1, 4, Sched::Any),
            p(rows, 33, 1024, Sched::Any),
            p(rows.div_ceil(2), 771, 3076, Sched::Any),
            p(1, 64, 16384, Sched::Any),
            p(rows, 4097, 1028, Sched::Any),
        ];
        ran += assert_twin_on_rounded_operands(&g, &mut rng, kernel, &shapes).len();
    }
    assert_eq!(ran, 15, "three GEMV tiles, five shapes each");
}
