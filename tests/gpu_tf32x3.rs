//! The 3xTF32 mode ([`Precision::Tf32x3`]): exact where TF32 cannot be, and within an fp32
//! GEMM's error bound everywhere, through every kernel of the mode.
//!
//! - `exact_where_tf32_is_not`: integer inputs with 12 significant bits (odd X entries between
//!   2¹¹ and 2¹²) that TF32 (11 bits) cannot hold but big + small can, small-integer W and bias,
//!   and K small enough that every partial sum and the epilogue stay exact in fp32: every Tf32x3
//!   plan must give the exact result bitwise, and the TF32 plans must visibly not.
//! - `fp32_bound_every_kernel_odd_shapes`: ≥ 60 odd shapes (tails in M, N and K, K % 4 ≠ 0,
//!   strided views) with every Tf32x3 kernel forced, against f64 with the per-element bound of
//!   an fp32 GEMM (tests/common/bounds.rs) and ‖e‖/‖ref‖ ≤ 2e-5.

mod common;

use common::{Case, Gpu, Rng};
use gemm_epilogue::{Dispatch, Family, Kernel, MatrixMut, MatrixRef, Plan, Precision};

fn tf32x3_kernels() -> Vec<Kernel> {
    Kernel::ALL.into_iter().filter(|k| k.precision() == Precision::Tf32x3).collect()
}

/// Inputs whose exact result fp32 holds: X odd integers of 12 bits with random signs, W and
/// the bias small integers. With K ≤ 256: |v| ≤ 256·4095·3 + 8 < 2²², and v·0.5 + v < 2²³ is a
/// multiple of 0.5, so v, v·s and the output are exact in fp32.
struct ExactInputs {
    m: usize,
    n: usize,
    k: usize,
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
}

impl ExactInputs {
    fn new(m: usize, n: usize, k: usize, rng: &mut Rng) -> Self {
        assert!(k <= 256, "keep every partial sum exact");
        let sign = |rng: &mut Rng| if rng.below(2) == 0 { 1.0 } else { -1.0 };
        let x = (0..m * k).map(|_| sign(rng) * (2049 + 2 * rng.below(1023)) as f32).collect();
        let w = (0..n * k).map(|_| rng.below(7) as f32 - 3.0).collect();
        let b = (0..n).map(|_| rng.below(17) as f32 - 8.0).collect();
        Self { m, n, k, x, w, b }
    }

    fn exact(&self, scale: f32) -> Vec<f32> {
        let (m, n, k) = (self.m, self.n, self.k);
        let mut out = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let v: i64 = (0..k).map(|kk| self.x[i * k + kk] as i64 * self.w[j * k + kk] as i64).sum::<i64>()
                    + self.b[j] as i64;
                let v = v as f64;
                out[i * n + j] = (v * scale as f64 + v) as f32;
            }
        }
        out
    }
}

/// One call of `gemm` (W raw or prepared, with or without a workspace) into a poisoned output;
/// returns the plan and the dense result (the padding checked untouched).
fn run_exact(
    g: &Gpu,
    dispatch: Dispatch,
    precision: Precision,
    (prepared, workspace): (bool, bool),
    inp: &ExactInputs,
) -> Option<(Plan, Vec<f32>)> {
    let (m, n, k) = (inp.m, inp.n, inp.k);
    let gemm = g.gemm.with_precision(precision).with_dispatch(dispatch);
    let s = &g.stream;
    let (x, w, b) = (s.clone_htod(&inp.x).unwrap(), s.clone_htod(&inp.w).unwrap(), s.clone_htod(&inp.b).unwrap());
    let xv = MatrixRef::from_slice(&x, m, k);
    let wv = MatrixRef::from_slice(&w, n, k);
    let bv = b.slice(0..n);
    let ldo = n + 3;
    let mut out = s.clone_htod(&common::poisoned(common::extent(m, n, ldo))).unwrap();
    let mut ov = MatrixMut::with_ld(out.slice_mut(0..common::extent(m, n, ldo)), m, n, ldo);
    let prepared_w = prepared.then(|| gemm.prepare_weight(s, &wv).expect("prepare_weight"));
    let mut ws = workspace.then(|| s.clone_htod(&common::poisoned(64 << 20)).unwrap());
    let result = match (&prepared_w, ws.as_mut()) {
        (Some(pw), Some(ws)) => gemm.run_with_workspace(s, &xv, pw, Some(&bv), 0.5, &mut ov, &mut ws.as_view_mut()),
        (Some(pw), None) => gemm.run(s, &xv, pw, Some(&bv), 0.5, &mut ov),
        (None, Some(ws)) => gemm.run_with_workspace(s, &xv, &wv, Some(&bv), 0.5, &mut ov, &mut ws.as_view_mut()),
        (None, None) => gemm.run(s, &xv, &wv, Some(&bv), 0.5, &mut ov),
    };
    let plan = match result {
        Ok(p) => p.expect("non-empty"),
        Err(e) => {
            if let Dispatch::Force(kernel) = dispatch {
                println!("refused: {kernel:?} (prepared {prepared}, workspace {workspace}): {e}");
                return None;
            }
            // Documented: a split weight is read by the sm_90 kernels alone, which need X with
            // 16-byte rows or a workspace to repack X into.
            let split = prepared && g.is_hopper() && precision == Precision::Tf32x3;
            assert!(
                split && !workspace && k % 4 != 0,
                "Auto refused {m}x{n}x{k} (prepared {prepared}, workspace {workspace}): {e}"
            );
            assert!(e.to_string().contains("split"), "{e}");
            return None;
        }
    };
    let host = s.clone_dtoh(&out).unwrap();
    Some((plan, common::take_view_checked(&host, 0, m, n, ldo, &format!("{plan:?}"))))
}

#[test]
fn exact_where_tf32_is_not() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("exact_where_tf32_is_not");
    // Tails in every dimension; K = 256 over 1 or 4 tiles splits along K (stream-K) on the H200.
    let shapes = [
        (1, 1, 1),
        (7, 13, 5),
        (64, 128, 256),
        (130, 70, 36),
        (129, 257, 100),
        (300, 136, 68),
        (256, 512, 256),
        (33, 1000, 255),
    ];
    let mut exact_plans = 0;
    for (m, n, k) in shapes {
        let inp = ExactInputs::new(m, n, k, &mut rng);
        let want = inp.exact(0.5);
        let mut dispatches: Vec<Dispatch> = tf32x3_kernels().into_iter().map(Dispatch::Force).collect();
        dispatches.push(Dispatch::Auto);
        for dispatch in dispatches {
            for (prepared, workspace) in [(false, false), (false, true), (true, false), (true, true)] {
                let Some((plan, got)) = run_exact(&g, dispatch, Precision::Tf32x3, (prepared, workspace), &inp) else {
                    continue;
                };
                assert_eq!(plan.precision, Precision::Tf32x3, "{m}x{n}x{k} {plan:?}");
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(a.to_bits() == b.to_bits(), "{m}x{n}x{k} prepared {prepared} workspace {workspace} {plan:?}: element ({}, {}) = {a}, exact {b}", i / n, i % n);
                }
                exact_plans += 1;
            }
        }
        // TF32 (one product) cannot hold the 12-bit X entries: it must visibly miss.
        if k >= 4 {
            for precision in [Precision::Tf32, Precision::Tf32Truncated] {
                let (plan, got) = run_exact(&g, Dispatch::Auto, precision, (false, true), &inp).expect("Auto runs");
                let wrong = got.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
                assert!(
                    wrong * 4 > got.len(),
                    "{precision:?} {plan:?} is exact on {} of {} elements: the inputs do not tell 3xTF32 from TF32",
                    got.len() - wrong,
                    got.len()
                );
            }
        }
    }
    println!("exact_where_tf32_is_not: {exact_plans} Tf32x3 plans bitwise exact");
    // Every kernel of the mode this device runs was exercised (Auto and the forced ones).
    assert!(exact_plans >= shapes.len() * 4, "{exact_plans}");
}

#[test]
fn fp32_bound_every_kernel_odd_shapes() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("fp32_bound_every_kernel_odd_shapes");
    let mut shapes: Vec<(usize, usize, usize)> =
        vec![(1, 1, 1), (1, 4096, 4095), (4097, 3, 33), (257, 129, 1023), (129, 257, 4097), (640, 768, 2049)];
    while shapes.len() < 64 {
        shapes.push((1 + rng.below(700), 1 + rng.below(700), 1 + rng.below(1500)));
    }
    let mut runs = 0;
    for (i, (m, n, k)) in shapes.into_iter().enumerate() {
        let base =
            Case::new(m, n, k).precision(Precision::Tf32x3).scale(rng.pick(&[0.5, -2.0, 3.0, 0.0])).bias(i % 3 != 0);
        // Odd cases strided and offset views; every case once with a workspace (odd K needs one
        // for the sm_90 kernels), alternately with W prepared (split) and raw.
        let base = if i % 2 == 1 { base.pad(3, 5, 1).offset(1, 2, 3, 1) } else { base };
        let case = base.workspace(true).prepared_w(i % 4 < 2);
        let auto = common::check(&g, &case, &mut rng).expect("ran");
        assert_eq!(auto.precision, Precision::Tf32x3, "{case:?}: {auto:?}");
        runs += 1;
        for kernel in tf32x3_kernels() {
            if common::accepts(&g, &case, kernel) {
                common::check(&g, &case.force(kernel), &mut rng).expect("ran");
                runs += 1;
            } else if kernel.family() == Family::TmaWgmma {
                assert_eq!(g.gemm.wave(kernel), 0, "{kernel:?} refused {case:?}");
            }
        }
    }
    println!("fp32_bound_every_kernel_odd_shapes: {runs} Tf32x3 calls within the fp32 bound");
}
