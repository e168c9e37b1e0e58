//! The TF32-emulating oracle (issue 15) on random data: every kernel of `Kernel::ALL` forced, and
//! Auto with each precision some kernel provides, over odd shapes, strided and offset views, with
//! and without a workspace (split-K, repacks). The host converts each operand as the call did
//! (`common::conversions`, from the plan: truncated, rounded to nearest, or split for 3xTF32),
//! sums in f64, and holds the output to the fp32-accumulation bound (`common::verify_emulated`;
//! docs/EPILOGUE.md, "The emulating reference") — far tighter than the operand-rounding bound
//! of `common::check`, so a kernel that converts an operand the wrong way (truncates instead of
//! rounding, breaks ties to even) fails it at small K, and one that drops or repeats a k-block
//! fails it at any K. A sixth of the inputs are TF32 ties (the 13 dropped bits exactly half an
//! ulp), where rounding to nearest-away and to nearest-even differ.

mod common;

use common::{Case, DeviceInputs, Inputs, Rng, XDist};
use gemm_epilogue::{Dispatch, Kernel, Precision};

/// Makes about a sixth of the values TF32 ties: the dropped 13 bits set to exactly 0x1000.
fn salt_ties(v: &mut [f32], rng: &mut Rng) {
    for x in v.iter_mut() {
        if rng.below(6) == 0 && x.is_finite() {
            *x = f32::from_bits((x.to_bits() & 0xffff_e000) | 0x1000);
        }
    }
}

/// Odd shapes: tails in M, N and K, tiny K (where the bound is tightest), strided and offset
/// views, K % 4 ≠ 0, and split-K shapes with a workspace.
fn cases() -> Vec<Case> {
    vec![
        Case::new(1, 1, 1),
        Case::new(7, 33, 5).x_dist(XDist::Sym),
        Case::new(63, 65, 16).pad(4, 0, 3),
        Case::new(130, 70, 36).offset(4, 8, 1, 2).scale(-2.0),
        Case::new(65, 17, 130).bias(false).scale(3.0).workspace(true),
        Case::new(33, 200, 64).offset(1, 0, 0, 0).workspace(true).x_dist(XDist::Sym),
        Case::new(257, 129, 100).pad(1, 3, 0).scale(0.0),
        Case::new(129, 300, 4100).workspace(true).scale(0.5),
        Case::new(3, 260, 1027).workspace(true).x_dist(XDist::Sym).scale(-0.5),
    ]
}

#[test]
fn emulated_every_kernel_on_odd_shapes() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("emulated_every_kernel_on_odd_shapes");
    let mut precisions = vec![Precision::Tf32];
    for k in Kernel::ALL {
        if !precisions.contains(&k.precision()) {
            precisions.push(k.precision());
        }
    }
    let (mut checked, mut skipped, mut worst) = (0usize, 0usize, 0f64);
    for (i, base) in cases().into_iter().enumerate() {
        let mut inputs = Inputs::generate(&base, &mut rng);
        salt_ties(&mut inputs.x, &mut rng);
        salt_ties(&mut inputs.w, &mut rng);
        let d = DeviceInputs::upload(&g, &inputs);
        let mut calls: Vec<(Case, Option<Kernel>)> = Kernel::ALL
            .into_iter()
            .map(|k| {
                let c = base.force(k);
                (if k.needs_rounded_w() { c.prepared_w(!c.workspace || i % 2 == 0) } else { c }, Some(k))
            })
            .collect();
        for &p in &precisions {
            calls.push((base.dispatch(Dispatch::Auto).precision(p), None));
            calls.push((base.dispatch(Dispatch::Auto).precision(p).prepared_w(true), None));
        }
        for (case, kernel) in calls {
            if let Some(k) = kernel {
                if let Some(why) = common::refusal(&g, &case, k) {
                    println!("skipped: {k:?} on {case:?}: {why}");
                    skipped += 1;
                    continue;
                }
            }
            if kernel.is_none() && common::auto_refuses(&g, &case) {
                println!("skipped: Auto on {case:?}: a split weight needs X with 16-byte rows or a workspace");
                skipped += 1;
                continue;
            }
            let o = common::execute_on(&g, &case, &d, false);
            let plan = o.plan.expect("ran");
            let rel = common::verify_emulated(
                &case,
                &inputs,
                &o.fused,
                &plan,
                case.effective_precision(&g.gemm),
                g.is_hopper(),
                &mut rng,
            );
            println!(
                "{}x{}x{} {:?}: ‖diff‖/‖magnitude‖ = {rel:.2e} ({:?}, stream-K {})",
                case.m, case.n, case.k, plan.kernel, plan.precision, plan.stream_k_tiles
            );
            worst = worst.max(rel);
            checked += 1;
        }
    }
    println!("emulated_every_kernel_on_odd_shapes: {checked} calls within the emulated bound (worst ‖diff‖/‖magnitude‖ {worst:.2e}), {skipped} skipped");
    assert!(checked > 0);
}
