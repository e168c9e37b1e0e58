//! The exact oracle (issue 15): small-integer inputs whose every product and partial sum is exact
//! in fp32 and TF32 (`common::exact`), through every kernel of `Kernel::ALL` forced (and Auto with
//! each precision some kernel provides), in every stream-K configuration — split-K at K ≥ 8192,
//! shared tails (alone, and with the wave before), the 2-CTA clusters — both sm_90 store paths
//! (TMA store: 16-byte output rows at 16-byte-aligned addresses; register store otherwise), no
//! workspace, and the repack (K % 4 ≠ 0, a misaligned view). Every output is compared with the
//! exact result bit for bit, on a poisoned output buffer whose padding must keep its poison
//! (`common::execute_on`). A kernel this device or shape cannot run is skipped with the crate's
//! typed reason printed (`skipped: …`), never silently.
//!
//! Table-driven over `Kernel::ALL`: a kernel added to the table (a 3xTF32 build, say) is covered
//! without touching this file. A kernel whose precision is `Tf32` or `Tf32Truncated` must also get
//! the stream-K configuration each shape is built for (`Expect`); others are only reported.

mod common;

use std::collections::BTreeMap;

use common::{Case, DeviceInputs, Gpu};
use gemm_epilogue::{Dispatch, Family, Kernel, Plan, Precision};

/// The stream-K a forced kernel must plan for a shape built for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Every tile shared along K (fewer tiles than half a wave, K ≥ 8192).
    Split,
    /// Some, not all, tiles shared (≥ 8 full waves and a partial one).
    Tail,
    /// No workspace: no stream-K.
    Whole,
    /// Whatever the plan says.
    Any,
}

/// One shape of a test, for every kernel (`only: None`) or for one.
#[derive(Clone, Copy, Debug)]
struct Run {
    what: &'static str,
    case: Case,
    expect: Expect,
    only: Option<Kernel>,
}

impl Run {
    fn all(what: &'static str, case: Case, expect: Expect) -> Self {
        Self { what, case, expect, only: None }
    }
}

/// Tiles (cluster tiles for the cluster kernels) of `kernel` on `case`.
fn tiles(kernel: Kernel, case: &Case) -> u32 {
    let (tm, tn, _) = kernel.tile();
    (case.m.div_ceil((tm * kernel.cluster_m()) as usize) * case.n.div_ceil(tn as usize)) as u32
}

/// Precisions Auto is asked for: the default and every one some kernel provides.
fn auto_precisions() -> Vec<Precision> {
    let mut v = vec![Precision::Tf32];
    for k in Kernel::ALL {
        if !v.contains(&k.precision()) {
            v.push(k.precision());
        }
    }
    v
}

/// The calls of one run: each kernel forced (W prepared for a kernel that reads W rounded when
/// there is no workspace to round it into, on alternate runs otherwise), and for a run of every
/// kernel Auto with each precision, on W as given and prepared.
fn calls(run: &Run, i: usize) -> Vec<(Case, Option<Kernel>)> {
    let kernels: Vec<Kernel> = match run.only {
        Some(k) => vec![k],
        None => Kernel::ALL.to_vec(),
    };
    let mut v: Vec<(Case, Option<Kernel>)> = kernels
        .into_iter()
        .map(|k| {
            let c = run.case.force(k);
            let c = if k.needs_rounded_w() { c.prepared_w(!c.workspace || i % 2 == 0) } else { c };
            (c, Some(k))
        })
        .collect();
    if run.only.is_none() {
        for p in auto_precisions() {
            v.push((run.case.dispatch(Dispatch::Auto).precision(p), None));
            v.push((run.case.dispatch(Dispatch::Auto).precision(p).prepared_w(true), None));
        }
    }
    v
}

fn key(c: &Case) -> String {
    format!(
        "{}x{}x{} pad {:?} off {:?} bias {} s {}",
        c.m,
        c.n,
        c.k,
        (c.pad_x, c.pad_w, c.pad_o),
        (c.off_x, c.off_w, c.off_o, c.off_b),
        c.bias,
        c.scale
    )
}

fn assert_expected(expect: Expect, kernel: Kernel, case: &Case, plan: &Plan, what: &str) {
    if matches!(kernel.family(), Family::Skinny | Family::Gemv) {
        // A skinny kernel's clusters split K instead, a GEMV CTA covers all of K: no stream-K,
        // whatever the workspace.
        assert_eq!(
            (plan.stream_k_tiles, plan.stream_k_ctas),
            (0, 0),
            "{what}: a {:?} kernel plans no stream-K",
            kernel.family()
        );
        return;
    }
    if !matches!(kernel.precision(), Precision::Tf32 | Precision::Tf32Truncated) {
        println!(
            "note: {what}: {kernel:?} planned stream-K {} of {} tiles (expected {expect:?}, not enforced for {:?})",
            plan.stream_k_tiles,
            tiles(kernel, case),
            kernel.precision()
        );
        return;
    }
    let (sk, t) = (plan.stream_k_tiles, tiles(kernel, case));
    let ok = match expect {
        Expect::Split => sk == t && plan.stream_k_ctas > 0,
        Expect::Tail => sk > 0 && sk < t && plan.stream_k_ctas > 0,
        Expect::Whole => sk == 0 && plan.stream_k_ctas == 0,
        Expect::Any => true,
    };
    assert!(ok, "{what}: {kernel:?} on {case:?} should plan {expect:?} ({t} tiles, wave {}), got {plan:?}", plan.grid);
}

/// Runs every call of every run, grouped by shape so that each shape's integer inputs and exact
/// output are made once; returns (calls checked, calls skipped).
fn run_exact(g: &Gpu, test: &str, runs: Vec<Run>) -> (usize, usize) {
    let mut rng = common::rng(test);
    let start = std::time::Instant::now();
    let mut groups: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    for r in runs {
        groups.entry(key(&r.case)).or_default().push(r);
    }
    let (mut checked, mut skipped, mut elements) = (0usize, 0usize, 0u64);
    for (i, (key, runs)) in groups.into_iter().enumerate() {
        let base = runs[0].case.dispatch(Dispatch::Auto);
        let inputs = common::integer_inputs(&base, &mut rng);
        let want = common::exact_output(&base, &inputs);
        let d = DeviceInputs::upload(g, &inputs);
        for run in &runs {
            for (case, kernel) in calls(run, i) {
                if let Some(k) = kernel {
                    if let Some(why) = common::refusal(g, &case, k) {
                        println!("skipped: {test}: {k:?} on {} ({key}): {why}", run.what);
                        skipped += 1;
                        continue;
                    }
                }
                let o = common::execute_on(g, &case, &d, false);
                let plan = o.plan.expect("a non-empty problem ran");
                let what = format!("{test}: {} {case:?} {plan:?} seed {:#x}", run.what, common::seed());
                common::assert_bitwise(&o.fused, &want, case.n, &what);
                if let Some(k) = kernel {
                    assert_expected(run.expect, k, &case, &plan, &what);
                }
                println!(
                    "{test}: {} {:?}: exact ({}; cluster {}, stream-K {} of {} tiles over {} CTAs, tma_store {}, repack x {} w {})",
                    run.what,
                    plan.kernel,
                    if kernel.is_some() { "forced".to_string() } else { format!("Auto {:?}", case.precision) },
                    plan.cluster,
                    plan.stream_k_tiles,
                    tiles(plan.kernel, &case),
                    plan.stream_k_ctas,
                    plan.tma_store,
                    plan.repack_x,
                    plan.repack_w
                );
                checked += 1;
                elements += (case.m * case.n) as u64;
            }
        }
    }
    println!("{test}: {checked} calls bitwise exact ({elements} elements), {skipped} skipped, {:.1?}", start.elapsed());
    assert!(checked > 0, "{test}: nothing ran");
    (checked, skipped)
}

/// The exact-range constants keep `v·s + v` exact (runs without a GPU).
#[test]
fn exact_range_keeps_the_epilogue_exact() {
    let v_max = (common::K_MAX as u64 * common::XW_MAX * common::XW_MAX + common::B_MAX) as f32;
    assert!((v_max as f64) < 2f64.powi(21), "{v_max}");
    const { assert!(common::K_MAX >= 32768, "the exact range must cover K = 32768") };
    for s in common::EXACT_SCALES {
        for v in [v_max, -v_max, v_max - 1.0, 1.0, 3.0, 0.0] {
            assert_eq!((v * s + v) as f64, v as f64 * s as f64 + v as f64, "s = {s}, v = {v}");
        }
    }
}

/// Split-K at large K: fewer tiles than half a wave for every kernel, each tile cut along K.
/// N % 4 == 0 (TMA store) and a strided output (register store); M and N tails; a last partial
/// k-block (K % 32 = 4).
#[test]
fn exact_split_k_every_kernel() {
    let Some(g) = common::gpu() else { return };
    let runs = vec![
        Run::all("split 1x4032x8192", Case::new(1, 4032, 8192).workspace(true).scale(0.5), Expect::Split),
        Run::all(
            "split 129x1000x8196 ldo 1001",
            Case::new(129, 1000, 8196).pad(0, 0, 1).workspace(true).scale(-2.0),
            Expect::Split,
        ),
        Run::all(
            "split 300x520x16384 strided",
            Case::new(300, 520, 16384).pad(4, 8, 4).offset(4, 8, 4, 3).bias(false).workspace(true).scale(0.0),
            Expect::Split,
        ),
    ];
    run_exact(&g, "exact_split_k_every_kernel", runs);
}

/// The shared tail of each kernel: (tiles) = 8 full waves and half a wave (shared alone), and 8
/// full waves and a thin one (shared with the wave before), sized from the kernel's own tile,
/// cluster and wave on this device. K is moderate here (the host computes every one of the tens
/// of millions of outputs exactly), but 49 k-blocks: the TMA kernels share no tail of tiles
/// under 48 k-blocks (src/gemm/stream_k.rs). The last cluster row has a single row (its second
/// CTA none).
#[test]
fn exact_shared_tails_every_kernel() {
    let Some(g) = common::gpu() else { return };
    let mut runs = Vec::new();
    for kernel in Kernel::ALL {
        let wave = g.gemm.wave(kernel) as usize;
        if wave == 0 {
            let why = common::refusal(&g, &Case::new(64, 64, 64).force(kernel).prepared_w(true), kernel);
            println!("skipped: exact_shared_tails_every_kernel: {kernel:?} cannot run on this device: {why:?}");
            continue;
        }
        let (tm, tn, _) = kernel.tile();
        let rows = (tm * kernel.cluster_m()) as usize;
        let tn = tn as usize;
        // 4 tile columns; the tile rows give 8 waves and a half (N % 4 == 0: TMA store) or 8 waves
        // and 4 tiles (N odd: register store).
        let half = Case::new((2 * wave + wave / 8) * rows - rows / 2, 4 * tn - 4, 1540).scale(3.0);
        let thin = Case::new((2 * wave) * rows + 1, 4 * tn - 5, 1544).bias(false).scale(-0.5);
        for (what, case) in [("tail: 8 waves and a half", half), ("tail: 8 waves and 4 tiles", thin)] {
            runs.push(Run { what, case: case.workspace(true), expect: Expect::Tail, only: Some(kernel) });
        }
    }
    run_exact(&g, "exact_shared_tails_every_kernel", runs);
}

/// No workspace, large K: whole tiles only, the persistent schedules and clusters over several
/// tiles; strided views (register store) and dense ones (TMA store).
#[test]
fn exact_without_workspace_every_kernel() {
    let Some(g) = common::gpu() else { return };
    let runs = vec![
        Run::all(
            "whole 257x300x8192 strided",
            Case::new(257, 300, 8192).pad(4, 8, 3).offset(4, 8, 0, 1).scale(0.25),
            Expect::Whole,
        ),
        Run::all("whole 200x136x8200", Case::new(200, 136, 8200).bias(false).scale(-2.0), Expect::Whole),
        Run::all("whole 1000x1024x8192", Case::new(1000, 1024, 8192).scale(0.5), Expect::Whole),
    ];
    run_exact(&g, "exact_without_workspace_every_kernel", runs);
}

/// The skinny kernels' splits of K at large K: 8 CTAs per cluster (64 × 16384, and 33 ×
/// 8196 with a last partial k-step), 3 (1000 × 8192), none (4096 × 8192); every row count up to
/// the 16-row tile; strided views. (Every kernel runs these too.)
#[test]
fn exact_skinny_splits_every_kernel() {
    let Some(g) = common::gpu() else { return };
    let runs = vec![
        Run::all("skinny 8x64x16384", Case::new(8, 64, 16384).scale(0.5), Expect::Any),
        Run::all(
            "skinny 16x33x8196 strided",
            Case::new(16, 33, 8196).pad(4, 8, 3).offset(4, 8, 1, 1).scale(-2.0),
            Expect::Any,
        ),
        Run::all("skinny 1x1000x8192", Case::new(1, 1000, 8192).bias(false).scale(3.0), Expect::Any),
        Run::all("skinny 5x4096x8192", Case::new(5, 4096, 8192).workspace(true).scale(0.25), Expect::Any),
    ];
    run_exact(&g, "exact_skinny_splits_every_kernel", runs);
}

/// The repack with a workspace: K % 4 ≠ 0 (both operands repacked for kernels that read 16-byte
/// rows), and an X view at an odd offset with K % 4 == 0 (X alone repacked), at large K.
#[test]
fn exact_repack_every_kernel() {
    let Some(g) = common::gpu() else { return };
    let runs = vec![
        Run::all("repack 65x130x8191", Case::new(65, 130, 8191).workspace(true).scale(0.5), Expect::Any),
        Run::all(
            "repack 100x260x8192 x at offset 1",
            Case::new(100, 260, 8192).offset(1, 0, 0, 0).workspace(true).scale(-0.5),
            Expect::Any,
        ),
        Run::all(
            "repack 33x47x8193 strided",
            Case::new(33, 47, 8193).pad(3, 1, 2).offset(1, 2, 3, 1).bias(false).workspace(true).scale(3.0),
            Expect::Any,
        ),
    ];
    run_exact(&g, "exact_repack_every_kernel", runs);
}
