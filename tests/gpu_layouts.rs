//! Layouts and special values: strided views, views at offsets (misaligned → the scalar kernels,
//! which do not need aligned rows), K % 4 ≠ 0, K = 0, M = 0 / N = 0, NaN/±Inf propagation,
//! bitwise agreement of the epilogue with the unfused `t = v*s; t + v` (no FMA contraction), and
//! `Linear`.

mod common;

use common::{Case, DeviceInputs, Gpu, Inputs, Rng, XDist};
use gemm_epilogue::testbed::reference::{self, RefElement};
use gemm_epilogue::{Dispatch, Error, Family, Kernel, Linear, MatrixMut, MatrixRef, Precision};

/// The calls of `case` to check: Auto on the W view and on a prepared W, and every kernel forced
/// that can run it here (the crate's answer, which must be the specified one: `common::accepts`)
/// — a kernel that reads W rounded ([`Kernel::needs_rounded_w`]) on a prepared W when it cannot
/// run the W view.
fn variants(g: &Gpu, case: &Case) -> Vec<Case> {
    let mut v = vec![case.dispatch(Dispatch::Auto), case.dispatch(Dispatch::Auto).prepared_w(true)];
    for k in Kernel::ALL {
        if common::accepts(g, case, k) {
            v.push(case.force(k));
        } else if k.needs_rounded_w() && common::accepts(g, &case.prepared_w(true), k) {
            v.push(case.force(k).prepared_w(true));
        } else if k.needs_split_w() && common::accepts(g, &split_w(case), k) {
            v.push(split_w(case).force(k));
        }
    }
    v
}

/// `case` with W prepared by a Tf32x3 handle: split, what the sm_90 Tf32x3 kernels read.
fn split_w(case: &Case) -> Case {
    case.precision(Precision::Tf32x3).prepared_w(true)
}

/// The forced calls that must be refused here: kernels reading 16-byte rows on unaligned
/// operands without a workspace, TMA kernels on K = 0, kernels that read W rounded on a raw W
/// without a workspace (and on a prepared W when that does not help either), kernels this
/// device cannot run.
fn refusing(g: &Gpu, case: &Case) -> Vec<(Case, Kernel)> {
    let mut v = Vec::new();
    for k in Kernel::ALL {
        if !common::accepts(g, case, k) {
            v.push((case.force(k), k));
            let prepared = case.prepared_w(true);
            if k.needs_rounded_w() && !common::accepts(g, &prepared, k) {
                v.push((prepared.force(k), k));
            }
            if k.needs_split_w() && !common::accepts(g, &split_w(case), k) {
                v.push((split_w(case).force(k), k));
            }
        }
    }
    v
}

/// Checks every call of [`variants`] and expects every one of [`refusing`] refused.
fn check_all(g: &Gpu, case: Case, rng: &mut Rng) {
    for c in variants(g, &case) {
        common::check(g, &c, rng);
    }
    for (c, k) in refusing(g, &case) {
        common::expect_refused(g, &c, k, rng);
    }
}

// ---- strided and offset views -------------------------------------------------------------------

/// ldx > K, ldw > K, ldo > N: the padding of the inputs is NaN (a kernel that reads it fails)
/// and the padding of the output must keep its poison.
#[test]
fn strided_views() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("strided_views");
    let cases = [
        // 16-byte-compatible strides: the kernels reading 16-byte rows (and TMA) run.
        Case::new(130, 67, 64).pad(4, 8, 3),
        Case::new(200, 130, 96).pad(12, 4, 6).scale(-1.0),
        Case::new(257, 129, 1000).pad(24, 4, 1).bias(false).scale(3.0),
        Case::new(64, 64, 32).pad(4, 4, 64).scale(1e-3).x_dist(XDist::Sym),
        // Strides that are not multiples of 4: only the kernels reading 4-byte elements can run.
        Case::new(65, 257, 36).pad(3, 1, 5),
        Case::new(129, 33, 128).pad(1, 0, 0).scale(0.0),
        Case::new(31, 100, 100).pad(0, 2, 2).bias(false),
    ];
    for case in cases {
        for c in variants(&g, &case) {
            let plan = common::check(&g, &c, &mut rng).expect("non-empty");
            if !c.rows_aligned() {
                assert!(!plan.kernel.needs_aligned_rows(), "{c:?} ran {plan:?}");
            }
        }
        for (c, k) in refusing(&g, &case) {
            common::expect_refused(&g, &c, k, &mut rng);
        }
    }
}

/// Views starting inside bigger buffers. x or w not 16-byte aligned (offset 1, 2 or 3 floats)
/// must route Auto to a kernel that does not need aligned rows (4-byte loads) and still be right;
/// the output may start anywhere.
#[test]
fn offset_views_route_to_scalar_kernels() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("offset_views_route_to_scalar_kernels");
    let misaligned = [
        Case::new(150, 70, 64).offset(1, 0, 0, 0),
        Case::new(150, 70, 64).offset(0, 2, 0, 0),
        Case::new(300, 260, 128).offset(3, 1, 0, 0).bias(false),
        Case::new(129, 65, 256).offset(2, 2, 1, 3).pad(4, 4, 1).scale(-1.0),
        Case::new(64, 64, 64).pad(1, 0, 0), // aligned start, ldx % 4 != 0
    ];
    for case in misaligned {
        assert!(!case.rows_aligned());
        let auto = common::check(&g, &case, &mut rng).expect("ran");
        assert!(!auto.kernel.needs_aligned_rows(), "misaligned {case:?} must run a 4-byte-load kernel, ran {auto:?}");
        check_all(&g, case, &mut rng);
    }
    // Offsets that keep 16-byte alignment (and a misaligned output, which needs no alignment):
    // the fast kernels still run.
    let aligned = [Case::new(150, 70, 64).offset(4, 8, 1, 1), Case::new(256, 256, 128).offset(4, 4, 3, 2).pad(4, 0, 5)];
    for case in aligned {
        assert!(case.rows_aligned());
        let auto = common::check(&g, &case, &mut rng).expect("ran");
        assert!(
            auto.kernel.needs_aligned_rows(),
            "aligned {case:?} should not fall back to a 4-byte-load kernel, ran {auto:?}"
        );
        check_all(&g, case, &mut rng);
    }
}

/// The sm_90 epilogue's two store paths. An output whose rows are whole 16-byte units at 16-byte
/// aligned addresses (base, ldo and N multiples of 4 floats) is staged in shared memory and
/// TMA-stored in 32-column boxes that the hardware clips at M and N (tails in both here, and
/// padding columns that must keep their poison); any other output is stored from registers.
/// Each TMA kernel, both paths, checked like every case (the kernels that read W rounded on a
/// prepared W, or on W rounded into a workspace).
#[test]
fn sm90_epilogue_store_paths() {
    let Some(g) = common::hopper_gpu("the TMA store epilogue") else { return };
    let mut rng = common::rng("sm90_epilogue_store_paths");
    let cases = [
        (Case::new(300, 36, 64).pad(0, 0, 4), true), // N = 36: a box of 4 columns
        (Case::new(129, 1000, 96).offset(0, 0, 4, 1).pad(4, 0, 8), true), // M tail of 1, aligned offset
        (Case::new(1, 4, 8), true),                  // one row, one partial box
        (Case::new(257, 260, 128).scale(3.0).bias(false), true),
        (Case::new(300, 36, 64).pad(0, 0, 1), false),       // ldo = 37
        (Case::new(200, 64, 64).offset(0, 0, 2, 0), false), // out 8-byte aligned only
        (Case::new(130, 258, 32).pad(0, 0, 0), false),      // ldo = 258
        (Case::new(200, 130, 96).pad(12, 4, 6).scale(-1.0), false), // ldo = 136 but N = 130
        (Case::new(64, 1, 32).pad(0, 0, 3), false),         // N = 1, ldo = 4
    ];
    for (i, (case, tma)) in cases.into_iter().enumerate() {
        for kernel in Kernel::ALL.into_iter().filter(|k| k.family() == Family::TmaWgmma) {
            let mut case = case.force(kernel);
            if kernel.needs_rounded_w() {
                case = if i % 2 == 0 { case.prepared_w(true) } else { case.workspace(true) };
            } else if kernel.needs_split_w() {
                case = if i % 2 == 0 { split_w(&case) } else { case.workspace(true) };
            }
            let plan = common::check(&g, &case, &mut rng).expect("ran");
            assert_eq!(plan.tma_store, tma, "{case:?}: {plan:?}");
        }
    }
}

/// K not a multiple of 4 → only the kernels that do not need aligned rows (4-byte loads); Auto
/// picks one.
#[test]
fn k_not_multiple_of_4_uses_scalar_kernels() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("k_not_multiple_of_4_uses_scalar_kernels");
    for (m, n, k) in [(64, 64, 4095), (200, 130, 3), (129, 257, 1), (33, 17, 2), (130, 66, 5), (1, 1000, 4097)] {
        let case = Case::new(m, n, k).scale(rng.pick(&[0.5, 3.0, 1e-3]));
        let auto = common::check(&g, &case, &mut rng).expect("ran");
        assert!(!auto.kernel.needs_aligned_rows(), "K = {k} must run a 4-byte-load kernel, ran {auto:?}");
        check_all(&g, case, &mut rng);
    }
}

/// With a workspace, operands whose rows are not 16-byte aligned are repacked (TF32-rounded) and
/// the fast kernels run; the result is checked like any other (f64 reference, cuBLAS), the
/// workspace starts poisoned, and kernels that need no repack must not do one. A raw W is also
/// repacked (rounded) for the kernels that read W rounded; a prepared W only when K % 4 != 0
/// (its rows are aligned otherwise, whatever the layout of the W view it was made from).
#[test]
fn workspace_repacks_unaligned_operands_for_the_fast_kernels() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("workspace_repacks_unaligned_operands_for_the_fast_kernels");
    let cases = [
        (Case::new(512, 640, 1023), true, true), // K % 4 != 0: both operands
        (Case::new(1000, 384, 1001).bias(false).scale(3.0), true, true),
        (Case::new(512, 520, 1024).offset(1, 0, 0, 0), true, false), // x misaligned by one float
        (Case::new(600, 512, 512).pad(0, 2, 0), false, true),        // ldw = 514, not a multiple of 4
    ];
    for (case, rx, rw) in cases {
        for prepared in [false, true] {
            let case = case.workspace(true).prepared_w(prepared);
            // What W's rows need: the raw view's alignment, or a prepared W's (K % 4 == 0 for
            // 16-byte loads; TMA reads its 128-byte rows whatever K). A raw W (or a W prepared
            // rounded, for a kernel that reads W split) is repacked into the form the kernel reads.
            let rw_for = |k: Kernel| {
                let rows = if prepared { case.k % 4 != 0 && k.family() != Family::TmaWgmma } else { rw };
                (rows && k.needs_aligned_rows()) || (k.needs_rounded_w() && !prepared) || k.needs_split_w()
            };
            let plan = common::check(&g, &case, &mut rng).expect("ran");
            assert_eq!((plan.repack_x, plan.repack_w), (rx, rw_for(plan.kernel)), "{plan:?} for {case:?}");
            assert!(plan.kernel.needs_aligned_rows(), "{plan:?} for {case:?}");
            for kernel in Kernel::ALL {
                // With a workspace, refused only by kernels this device cannot run, and by the
                // skinny kernels beyond their rows of X.
                if !common::accepts(&g, &case, kernel) {
                    let too_many_rows = kernel.max_m().is_some_and(|rows| case.m > rows as usize);
                    assert!(g.gemm.wave(kernel) == 0 || too_many_rows, "{kernel:?} refused {case:?}");
                    continue;
                }
                let p = common::check(&g, &case.force(kernel), &mut rng).expect("ran");
                assert_eq!(
                    (p.repack_x, p.repack_w),
                    (rx && kernel.needs_aligned_rows(), rw_for(kernel)),
                    "{p:?} for {case:?}"
                );
            }
        }
    }
    // Small problems repack only when a kernel that needs it is forced.
    let small = Case::new(33, 65, 4095).workspace(true);
    let p = common::check(&g, &small, &mut rng).expect("ran");
    assert!(!p.kernel.needs_aligned_rows() && !p.repack_x && !p.repack_w, "{p:?}");
    for kernel in Kernel::ALL.into_iter().filter(|k| k.needs_aligned_rows()) {
        if common::accepts(&g, &small, kernel) {
            let p = common::check(&g, &small.force(kernel), &mut rng).expect("ran");
            assert!(p.repack_x && p.repack_w, "{p:?}");
        }
    }
}

// ---- degenerate shapes ----------------------------------------------------------------------------

/// K = 0: v = b (or 0 without bias), so out = (b*s) + b exactly, bit for bit.
#[test]
fn k_zero_gives_the_epilogue_of_the_bias() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("k_zero_gives_the_epilogue_of_the_bias");
    for bias in [true, false] {
        for scale in [0.5f32, -1.0, 0.1, 3.0, 0.0] {
            let base = Case::new(70, 130, 0).bias(bias).scale(scale).pad(0, 0, 2);
            let inputs = Inputs::generate(&base, &mut rng);
            let b = inputs.b_host(&base).map(<[f32]>::to_vec);
            for case in variants(&g, &base) {
                let o = common::execute(&g, &case, &inputs, false);
                let plan = o.plan.expect("M, N > 0");
                for r in 0..case.m {
                    for c in 0..case.n {
                        let v = b.as_ref().map_or(0.0, |b| b[c]);
                        let want = common::epilogue_f32(v, scale);
                        let got = o.fused[r * case.n + c];
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "K = 0, {case:?}, {plan:?}: ({r}, {c}) = {got:e}, want {want:e}"
                        );
                    }
                }
            }
            // TMA cannot describe K = 0: the TMA kernels refuse it (the skinny kernels refuse
            // these 70 rows of X); every other kernel this device can run ran above.
            for (case, kernel) in refusing(&g, &base) {
                let too_many_rows = kernel.max_m().is_some_and(|rows| case.m > rows as usize);
                assert!(
                    kernel.family() == Family::TmaWgmma || too_many_rows || g.gemm.wave(kernel) == 0,
                    "{kernel:?} refused K = 0"
                );
                common::expect_refused(&g, &case, kernel, &mut rng);
            }
        }
    }
}

/// M = 0 or N = 0: Ok(None) and nothing written, whatever the dispatch.
#[test]
fn empty_m_or_n_writes_nothing() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("empty_m_or_n_writes_nothing");
    for (m, n, k) in [(0, 64, 32), (64, 0, 32), (0, 0, 32), (0, 5, 0), (0, 64, 3)] {
        for bias in [true, false] {
            let mut dispatches = vec![Dispatch::Auto];
            dispatches.extend(Kernel::ALL.map(Dispatch::Force));
            for d in dispatches {
                let case = Case::new(m, n, k).bias(bias).dispatch(d).pad(0, 0, 3);
                let inputs = Inputs::generate(&case, &mut rng);
                let dev = DeviceInputs::upload(&g, &inputs);
                let (x, w, b) = (dev.x_view(&case), dev.w_view(&case), dev.b_view(&case));
                // Room for a few rows even though the view is empty.
                let mut out = g.stream.clone_htod(&common::poisoned(64 * case.ldo() + 64)).unwrap();
                let gemm = g.gemm.with_dispatch(d);
                let len = common::extent(m, n, case.ldo());
                {
                    let mut o = MatrixMut::with_ld(out.slice_mut(0..len), m, n, case.ldo());
                    let plan = gemm.plan(&g.stream, &x, &w, b.as_ref(), &o.view());
                    assert!(matches!(plan, Ok(None)), "plan of {case:?}: {plan:?}");
                    let r = gemm.run(&g.stream, &x, &w, b.as_ref(), 0.5, &mut o);
                    assert!(matches!(r, Ok(None)), "run of {case:?}: {r:?}");
                    g.baseline
                        .linear_scale_residual(&x, &w, b.as_ref(), 0.5, &mut o)
                        .expect("baseline on an empty problem");
                }
                common::assert_all_poisoned(&g.stream.clone_dtoh(&out).unwrap(), &format!("{case:?}"));
            }
        }
    }
}

// ---- NaN and Inf ------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Class {
    Nan,
    PosInf,
    NegInf,
    Finite,
}

fn class(v: f64) -> Class {
    if v.is_nan() {
        Class::Nan
    } else if v == f64::INFINITY {
        Class::PosInf
    } else if v == f64::NEG_INFINITY {
        Class::NegInf
    } else {
        Class::Finite
    }
}

/// NaN and ±Inf in X, W and b propagate as IEEE arithmetic (and PyTorch) would: the expected
/// class of each element comes from the f64 reference; finite elements stay within the bound.
#[test]
fn nan_and_inf_propagate() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("nan_and_inf_propagate");
    let (m, n, k) = (96, 80, 72);
    for (bias, scale) in [(true, 0.5f32), (true, 0.0), (true, -1.0), (false, 3.0)] {
        let base = Case::new(m, n, k).bias(bias).scale(scale);
        let clean = Inputs::generate(&base, &mut rng);
        let mut x: Vec<f32> = (0..m).flat_map(|r| clean.x[r * k..r * k + k].to_vec()).collect();
        let mut w: Vec<f32> = (0..n).flat_map(|r| clean.w[r * k..r * k + k].to_vec()).collect();
        let mut b = clean.b_host(&base).map(<[f32]>::to_vec);
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        x[3 * k + 5] = nan;
        x[10 * k + 7] = inf;
        x[11 * k + 8] = -inf;
        x[40 * k + 1] = inf; // +Inf and −Inf in one row: NaN or ±Inf per column, by the signs of w
        x[40 * k + 2] = -inf;
        x[95 * k + 71] = inf; // last row, last k
        w[20 * k + 9] = nan;
        w[30 * k] = inf;
        w[31 * k + 71] = -inf;
        w[79 * k + 33] = inf; // last column
        if let Some(b) = &mut b {
            b[50] = nan;
            b[51] = inf;
            b[52] = -inf;
        }
        let inputs = Inputs::from_dense(&base, &x, &w, b.as_deref());
        let (xh, wh, bh) = (inputs.x_host(&base), inputs.w_host(&base), inputs.b_host(&base));
        let want: Vec<RefElement> = reference::linear_scale_residual(xh, wh, bh, scale);
        let classes = [Class::Nan, Class::PosInf, Class::NegInf, Class::Finite];
        for c in classes {
            // The pattern must exercise every class (with b or scale 0/−1 some vanish, that is fine).
            let count = want.iter().filter(|e| class(e.value) == c).count();
            println!("bias {bias} scale {scale}: {count} expected {c:?}");
        }
        assert!(want.iter().any(|e| e.value.is_nan()) && want.iter().any(|e| e.value.is_finite()));
        for case in variants(&g, &base) {
            let o = common::execute(&g, &case, &inputs, false);
            let plan = o.plan.expect("ran");
            if plan.precision == Precision::Tf32x3 {
                // Documented: an infinite operand's small part is Inf − Inf = NaN, so 3xTF32
                // turns ±Inf results that come from products into NaN (an infinite bias stays
                // ±Inf); NaN stays NaN and finite results stay finite.
                for (got, e) in o.fused.iter().zip(&want) {
                    let ok = match class(e.value) {
                        Class::PosInf | Class::NegInf => got.is_nan() || class(*got as f64) == class(e.value),
                        c => class(*got as f64) == c,
                    };
                    assert!(ok, "{case:?} {plan:?}: {got:e} for {:e}", e.value);
                }
                continue;
            }
            let coeff = common::coeff(common::unit_roundoff(&plan), k);
            for r in 0..m {
                for c in 0..n {
                    let e = want[r * n + c];
                    let got = o.fused[r * n + c];
                    assert_eq!(
                        class(got as f64),
                        class(e.value),
                        "{case:?} {plan:?}: ({r}, {c}) = {got:e}, reference {:e}",
                        e.value
                    );
                    if got.is_finite() {
                        assert!(
                            approx::abs_diff_eq!(
                                got as f64,
                                e.value,
                                epsilon = coeff * e.magnitude + common::ABS_SLACK
                            ),
                            "{case:?} {plan:?}: ({r}, {c}) = {got:e}, reference {:e} ± {:e}",
                            e.value,
                            coeff * e.magnitude
                        );
                    }
                }
            }
        }
    }
}

// ---- bitwise epilogue ---------------------------------------------------------------------------------

/// With inputs exactly representable in TF32 whose products and sums are exact in fp32 (multiples
/// of 1/8 with ≤ 5 significant bits, K = 4), every GEMM computes v exactly, so every kernel and
/// cuBLAS + elementwise must produce exactly `t = v*s; t + v` (two roundings). s = 0.1 makes
/// `fma(v, s, v)` differ from that for some elements, which the test asserts, so an FMA-contracted
/// epilogue would fail.
#[test]
fn epilogue_matches_unfused_bitwise() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("epilogue_matches_unfused_bitwise");
    let (m, n, k) = (160, 136, 4);
    let s = 0.1f32;
    // x = ±(1 + i/1024), w = ±(1 + j/1024)/16: exact in TF32 (10 fraction bits); each product
    // lies in [1/16, 1/4) with at most 24 fraction bits, so every partial sum of K = 4 of them
    // stays below 1 and is exact in fp32, in any order, rounded or truncated to TF32. v then has
    // ~22 significant bits: enough for fma(v, s, v) to differ from (v*s)+v on many elements.
    // The bias ±(1 + j/1024)/64 keeps v exact unless |v| >= 1: columns are redrawn until it is.
    let unit = |rng: &mut Rng, scale: f32| -> f32 {
        let v = (1.0 + rng.below(1024) as f32 / 1024.0) * scale;
        if rng.below(2) == 0 {
            v
        } else {
            -v
        }
    };
    for bias in [true, false] {
        let base = Case::new(m, n, k).bias(bias).scale(s);
        let x: Vec<f32> = (0..m * k).map(|_| unit(&mut rng, 1.0)).collect();
        let w: Vec<f32> = (0..n * k).map(|_| unit(&mut rng, 1.0 / 16.0)).collect();
        let acc = |r: usize, c: usize| -> f64 { (0..k).map(|i| x[r * k + i] as f64 * w[c * k + i] as f64).sum() };
        let b: Option<Vec<f32>> = bias.then(|| {
            (0..n)
                .map(|c| loop {
                    let b = unit(&mut rng, 1.0 / 64.0);
                    if (0..m).all(|r| ((acc(r, c) + b as f64) as f32) as f64 == acc(r, c) + b as f64) {
                        break b;
                    }
                })
                .collect()
        });
        let mut v = vec![0f32; m * n];
        let mut fma_differs = 0usize;
        for r in 0..m {
            for c in 0..n {
                let exact: f64 = (0..k).map(|i| x[r * k + i] as f64 * w[c * k + i] as f64).sum::<f64>()
                    + b.as_ref().map_or(0.0, |b| b[c] as f64);
                let vf = exact as f32;
                assert_eq!(vf as f64, exact, "test data must make v exact in f32");
                v[r * n + c] = vf;
                if vf.mul_add(s, vf).to_bits() != common::epilogue_f32(vf, s).to_bits() {
                    fma_differs += 1;
                }
            }
        }
        println!("bias {bias}: fma(v, s, v) differs from (v*s)+v in {fma_differs} of {} elements", m * n);
        assert!(fma_differs > 0, "the data does not distinguish an FMA from two roundings");
        let inputs = Inputs::from_dense(&base, &x, &w, b.as_deref());
        let check = |got: &[f32], what: &str| {
            for (i, (&got, &v)) in got.iter().zip(&v).enumerate() {
                let want = common::epilogue_f32(v, s);
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{what}: element ({}, {}): got {got:e}, want (v*s)+v = {want:e} for v = {v:e} (fma would give {:e})",
                    i / n,
                    i % n,
                    v.mul_add(s, v)
                );
            }
        };
        for case in variants(&g, &base) {
            let o = common::execute(&g, &case, &inputs, true);
            let plan = o.plan.expect("ran");
            check(&o.fused, &format!("fused {plan:?}"));
            check(o.cublas.as_deref().expect("cuBLAS"), "cuBLAS + elementwise");
        }
    }
}

// ---- Linear ---------------------------------------------------------------------------------------------

/// `Linear` holds W prepared by its handle ([`Linear::prepared_weight`]) and every call reads it:
/// `forward` is `FusedGemm::run_with_workspace` on that prepared weight with the workspace
/// `workspace_len` asks for (`run` when it asks none), and `forward_into` is `FusedGemm::run` on
/// it — bit for bit, and for the default handle (`Nearest`) and one that truncates. The numbers
/// are checked like every case (f64 reference, cuBLAS), through the harness's own prepared W.
#[test]
fn linear_forward_matches_run() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("linear_forward_matches_run");
    let shapes = [
        (300, 200, 128, true, 0.5f32, None),
        (77, 65, 33, false, 3.0, None),
        (1, 4096, 4096, true, -1.0, None),
        (300, 200, 128, true, 0.5, Some(Precision::Tf32Truncated)),
        (1, 4096, 4096, true, 3.0, Some(Precision::Tf32Truncated)),
    ];
    for (m, n, k, bias, scale, rounding) in shapes {
        let mut case = Case::new(m, n, k).bias(bias).scale(scale).prepared_w(true);
        if let Some(r) = rounding {
            case = case.precision(r);
        }
        let gemm = case.gemm(&g.gemm);
        let inputs = Inputs::generate(&case, &mut rng);
        // The dense data (offsets and padding are 0 in `case`) through Linear.
        let w = g.stream.clone_htod(&inputs.w[..n * k]).unwrap();
        let b = inputs.b_host(&case).map(|b| g.stream.clone_htod(b).unwrap());
        let layer = Linear::new(gemm.clone(), w, b, k, n, scale).expect("Linear::new");
        assert_eq!((layer.in_features(), layer.out_features(), layer.scale()), (k, n, scale));
        let pw = layer.prepared_weight();
        assert_eq!(
            (pw.rows(), pw.cols(), pw.ld(), pw.precision()),
            (n, k, k.next_multiple_of(32), gemm.precision()),
            "{case:?}"
        );
        let x = g.stream.clone_htod(&inputs.x[..m * k]).unwrap();
        let xv = MatrixRef::from_slice(&x, m, k);
        let bias_view = layer.bias().map(|b| b.as_view());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();

        // forward ≡ run(_with_workspace) on the layer's prepared weight, as workspace_len says.
        let y = g.stream.clone_dtoh(&layer.forward(&x, m).expect("forward").expect("not empty")).unwrap();
        assert_eq!(y.len(), m * n);
        let direct = {
            let mut out = g.stream.clone_htod(&common::poisoned(m * n)).unwrap();
            let plan = {
                let mut o = MatrixMut::new(out.slice_mut(0..m * n), m, n);
                let len = gemm.workspace_len(&g.stream, &xv, pw).expect("workspace_len");
                if len > 0 {
                    let mut ws = g.stream.clone_htod(&common::poisoned(len)).unwrap();
                    gemm.run_with_workspace(
                        &g.stream,
                        &xv,
                        pw,
                        bias_view.as_ref(),
                        scale,
                        &mut o,
                        &mut ws.as_view_mut(),
                    )
                } else {
                    gemm.run(&g.stream, &xv, pw, bias_view.as_ref(), scale, &mut o)
                }
                .expect("run on the prepared weight")
            };
            println!("{case:?}: forward runs {plan:?}");
            g.stream.clone_dtoh(&out).unwrap()
        };
        assert!(bits(&y) == bits(&direct), "Linear::forward differs from run on its prepared weight for {case:?}");
        // The same call through the harness (W prepared by an equal handle), with its checks.
        let outcome = common::execute(&g, &case.workspace(true), &inputs, true);
        common::verify(&case, &inputs, &outcome, &mut rng);
        assert!(
            bits(&y) == bits(&outcome.fused),
            "Linear::forward differs from the harness's run_with_workspace for {case:?}"
        );

        // forward_into a strided, poisoned output ≡ run on the prepared weight, no workspace.
        let ldo = n + 3;
        let mut out = g.stream.clone_htod(&common::poisoned(m * ldo + common::TAIL)).unwrap();
        let plan = {
            let mut o = MatrixMut::with_ld(out.slice_mut(0..common::extent(m, n, ldo)), m, n, ldo);
            layer.forward_into(&g.stream, &xv, &mut o).expect("forward_into")
        };
        let host = g.stream.clone_dtoh(&out).unwrap();
        let dense = common::take_view_checked(&host, 0, m, n, ldo, "forward_into");
        let run = common::execute(&g, &case.pad(0, 0, ldo - n), &inputs, false);
        assert_eq!(plan, run.plan, "{case:?}");
        assert!(
            bits(&dense) == bits(&run.fused),
            "forward_into differs from run on a prepared weight for {case:?} ({plan:?})"
        );
    }
}

/// K % 4 != 0 on a large layer: X's rows are not 16-byte aligned, so `forward` allocates the
/// workspace itself and repacks X into it (the fast path; on sm_90 TMA reads the prepared W's
/// 128-byte rows as they are, elsewhere the 16-byte loads need W repacked too), and must produce
/// what `run_with_workspace` on the prepared weight produces, bit for bit.
#[test]
fn linear_forward_repacks_when_k_is_not_a_multiple_of_4() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("linear_forward_repacks_when_k_is_not_a_multiple_of_4");
    let case = Case::new(512, 640, 1023).workspace(true).prepared_w(true);
    let inputs = Inputs::generate(&case, &mut rng);
    let outcome = common::execute(&g, &case, &inputs, true);
    common::verify(&case, &inputs, &outcome, &mut rng);
    let plan = outcome.plan.expect("ran");
    assert!(plan.repack_x && plan.repack_w == (plan.kernel.family() == Family::MmaSync), "{plan:?}");

    let (m, n, k) = (case.m, case.n, case.k);
    let w = g.stream.clone_htod(&inputs.w[..n * k]).unwrap();
    let b = inputs.b_host(&case).map(|b| g.stream.clone_htod(b).unwrap());
    let layer = Linear::new(g.gemm.clone(), w, b, k, n, case.scale).expect("Linear::new");
    let x = g.stream.clone_htod(&inputs.x[..m * k]).unwrap();
    let y = g.stream.clone_dtoh(&layer.forward(&x, m).expect("forward").expect("not empty")).unwrap();
    assert!(
        y.iter().zip(&outcome.fused).all(|(a, b)| a.to_bits() == b.to_bits()),
        "Linear::forward differs from run_with_workspace on a prepared weight ({plan:?})"
    );
}

#[test]
fn linear_rejects_wrong_lengths() {
    let Some(g) = common::gpu() else { return };
    let (k, n) = (64, 48);
    let buf = |len: usize| g.stream.clone_htod(&vec![0.25f32; len]).unwrap();

    let r = Linear::new(g.gemm.clone(), buf(n * k - 1), None, k, n, 0.5);
    assert!(
        matches!(r, Err(Error::ShapeMismatch { expected, found, .. }) if expected == n * k && found == n * k - 1),
        "{r:?}"
    );
    assert!(r.unwrap_err().to_string().contains("weight"));
    let r = Linear::new(g.gemm.clone(), buf(n * k + 1), None, k, n, 0.5);
    assert!(matches!(r, Err(Error::ShapeMismatch { .. })), "{r:?}");
    let r = Linear::new(g.gemm.clone(), buf(n * k), Some(buf(n + 1)), k, n, 0.5);
    assert!(matches!(r, Err(Error::ShapeMismatch { expected, found, .. }) if expected == n && found == n + 1), "{r:?}");
    assert!(r.unwrap_err().to_string().contains("bias"));
    let r = Linear::new(g.gemm.clone(), buf(n * k), Some(buf(n - 1)), k, n, 0.5);
    assert!(matches!(r, Err(Error::ShapeMismatch { .. })), "{r:?}");

    let layer = Linear::new(g.gemm.clone(), buf(n * k), Some(buf(n)), k, n, 0.5).expect("valid");
    let r = layer.forward(&buf(10 * k + 1), 10);
    assert!(
        matches!(r, Err(Error::ShapeMismatch { expected, found, .. }) if expected == 10 * k && found == 10 * k + 1),
        "{r:?}"
    );
}

/// An empty batch (`rows = 0`) or an empty layer output gives `Ok(None)`: nothing allocated,
/// nothing launched, no uninitialised stand-in. An output too large to allocate is an error,
/// not a panic: past what a byte count can hold `DimensionTooLarge`, within it the driver's
/// out-of-memory `Driver` error. Needs 0-length device buffers, which cudarc makes with
/// `CudaStream::null` where the driver allows a 0-byte allocation (skipped where it does not).
#[test]
fn linear_forward_of_empty_or_unallocatable_outputs() {
    let Some(g) = common::gpu() else { return };
    let empty = match g.stream.null::<f32>() {
        Ok(e) => e,
        Err(e) => {
            println!("skipped: this driver refuses a 0-byte allocation ({e:?}), so no empty x can be made");
            return;
        }
    };
    // K = 0: x of any number of rows is the empty buffer; v = b.
    let n = 1usize << 20;
    let layer = Linear::new(g.gemm.clone(), g.stream.null::<f32>().expect("null"), None, 0, n, 0.5)
        .expect("a layer with in_features = 0");
    assert!(matches!(layer.forward(&empty, 0), Ok(None)), "rows = 0 must give Ok(None)");
    // 2^40 · 2^20 elements: no device has 4 EiB.
    match layer.forward(&empty, 1 << 40) {
        Err(Error::DimensionTooLarge { .. }) | Err(Error::Driver(_)) => {}
        r => panic!("an output of 2^60 elements must be refused with an error, got {r:?}"),
    }
    // 2^45 · 2^20 = 2^65 overflows usize.
    assert!(matches!(layer.forward(&empty, 1 << 45), Err(Error::DimensionTooLarge { .. })));
    // 2^30 · 2^20 = 2^50 elements, 4 PiB: the driver's out-of-memory error.
    match layer.forward(&empty, 1 << 30) {
        Err(Error::Driver(e)) => println!("4 PiB output: {e:?}"),
        Err(Error::DimensionTooLarge { .. }) => {}
        r => panic!("a 4 PiB output must be an error, got {r:?}"),
    }
    // A layer with out_features = 0: any batch gives Ok(None).
    let layer =
        Linear::new(g.gemm.clone(), g.stream.null::<f32>().expect("null"), None, 64, 0, 0.5).expect("out_features = 0");
    let x = g.stream.clone_htod(&vec![1.0f32; 3 * 64]).unwrap();
    assert!(matches!(layer.forward(&x, 3), Ok(None)), "out_features = 0 must give Ok(None)");
}
