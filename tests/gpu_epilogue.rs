//! The epilogue forms ([`Epilogue`]) on every kernel that can run each case, against the seed
//! form of the same kernel: `ScaleAdd(0)` (the register path every other test checks against f64
//! and cuBLAS) gives `v` itself, and every other form must equal its formula applied to that `v`
//! — bitwise where the host computes the formula exactly (identity, ReLU, `v·s + v`, the
//! residual's fma), within a bound of the f32 transcendental's error for GELU (erf and tanh) and
//! SiLU. A residual through `C` and the in-place one through `out` must agree bitwise. Odd
//! shapes (unaligned: repacks and direct stores), TMA-aligned ones, decoding sizes (GEMV and
//! skinny) and a split-K one, strided `C` and `out` whose padding must keep its poison, and a `C`
//! of a stride of its own (odd: copied element by element) under an `out` stored through TMA.
//! PyTorch's own kernels are the oracle of python/tests/test_gpu.py on the H200.

mod common;

use common::{Gpu, Rng};
use gemm_epilogue::cudarc::driver::{CudaSlice, CudaView};
use gemm_epilogue::{Activation, Dispatch, Epilogue, Error, Family, Gemm, Kernel, MatrixMut, MatrixRef};

const POISON: u32 = 0x7fc0_dead;

/// The operands of one shape on the device, `out` at row stride `ld` and `C` at `c_ld` (> N:
/// padding). For `out` a multiple of 4 lets the sm_90 kernels store it through TMA, any other
/// stride makes them store from registers; for `C` an odd stride makes them copy it element by
/// element instead of in 8-byte pairs.
struct Operands {
    m: usize,
    n: usize,
    k: usize,
    ld: usize,
    c_ld: usize,
    x: CudaSlice<f32>,
    w: CudaSlice<f32>,
    bias: CudaSlice<f32>,
    c_host: Vec<f32>,
    c: CudaSlice<f32>,
}

impl Operands {
    /// `C[r][col]` as uploaded.
    fn c_at(&self, r: usize, col: usize) -> f32 {
        self.c_host[r * self.c_ld + col]
    }
}

fn operands(g: &Gpu, rng: &mut Rng, (m, n, k): (usize, usize, usize), ld: usize, c_ld: usize) -> Operands {
    let scale = 1.0 / (k.max(1) as f32).sqrt();
    let xs: Vec<f32> = (0..m * k).map(|_| rng.sym(2.0)).collect();
    let ws: Vec<f32> = (0..n * k).map(|_| rng.sym(2.0 * scale)).collect();
    let bs: Vec<f32> = (0..n).map(|_| rng.sym(1.0)).collect();
    let c_host: Vec<f32> =
        (0..m * c_ld).map(|i| if i % c_ld < n { rng.sym(3.0) } else { f32::from_bits(POISON) }).collect();
    let up = |v: &[f32]| g.stream.clone_htod(v).expect("upload");
    Operands { m, n, k, ld, c_ld, x: up(&xs), w: up(&ws), bias: up(&bs), c: up(&c_host), c_host }
}

/// Runs `epilogue` with `kernel` forced into an `out` that starts as `start` (M × ld), returns
/// its M × N values after checking that the padding kept its bits; `None` when the kernel
/// cannot run the call here (and its refusal said so).
fn run(g: &Gpu, o: &Operands, kernel: Kernel, epilogue: Epilogue<()>, in_place: bool) -> Option<(Vec<f32>, bool)> {
    let gemm = g.gemm.with_dispatch(Dispatch::Force(kernel));
    let x = MatrixRef::from_slice(&o.x, o.m, o.k);
    let w = MatrixRef::from_slice(&o.w, o.n, o.k);
    let bias = o.bias.as_view();
    let c = MatrixRef::with_ld(o.c.as_view(), o.m, o.n, o.c_ld);
    // In place, out starts as C (in out's layout, its padding poisoned).
    let start: Vec<f32> = (0..o.m * o.ld)
        .map(|i| if in_place && i % o.ld < o.n { o.c_at(i / o.ld, i % o.ld) } else { f32::from_bits(POISON) })
        .collect();
    let mut out_buf = g.stream.clone_htod(&start).expect("upload");
    let ws_len = match gemm.workspace_len(&g.stream, &x, &w) {
        Ok(len) => len,
        Err(Error::KernelUnavailable { .. }) => return None,
        Err(e) => panic!("{kernel:?}: workspace_len: {e}"),
    };
    let mut ws = g.stream.alloc_zeros::<f32>(ws_len.max(1)).expect("alloc");
    let mut ws_view = ws.as_view_mut();
    let mut out = MatrixMut::with_ld(out_buf.as_view_mut(), o.m, o.n, o.ld);
    let epilogue = match epilogue.residual {
        None => Epilogue::activation(epilogue.activation),
        Some(r) if in_place => Epilogue::activation(epilogue.activation).with_residual_out(r.beta),
        Some(r) => Epilogue::activation(epilogue.activation).with_residual(&c, r.beta),
    };
    let gemm_args = Gemm { x: &x, w: &w, bias: Some(&bias), epilogue, out: &mut out, workspace: Some(&mut ws_view) };
    let plan = match gemm.run_gemm(&g.stream, gemm_args) {
        Ok(plan) => plan.expect("M, N > 0"),
        Err(Error::KernelUnavailable { .. }) => return None,
        Err(e) => panic!("{kernel:?}: {e}"),
    };
    let host = g.stream.clone_dtoh(&out_buf).expect("download");
    let mut dense = Vec::with_capacity(o.m * o.n);
    for r in 0..o.m {
        for col in 0..o.ld {
            let got = host[r * o.ld + col];
            if col < o.n {
                dense.push(got);
            } else {
                assert_eq!(got.to_bits(), start[r * o.ld + col].to_bits(), "{kernel:?}: padding ({r}, {col}) written");
            }
        }
    }
    Some((dense, plan.stream_k_tiles > 0))
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || (a == 0.0 && b == 0.0)
}

/// `f(v)` in f32 where the host computes PyTorch's formula exactly; None for the transcendental ones.
fn exact(a: Activation, v: f32) -> Option<f32> {
    match a {
        Activation::Identity => Some(v),
        Activation::Relu => Some(if v.is_nan() || v > 0.0 { v } else { 0.0 }),
        Activation::ScaleAdd(s) => Some(v * s + v),
        _ => None,
    }
}

/// |f(v) − f64 f(v)| for GELU and SiLU in f32: a few ulp of the result plus, for GELU, the
/// absolute error of `1 + erf` / `1 + tanh` (a few ulp of 1, scaled by v/2) where they cancel.
fn transcendental_bound(a: Activation, v: f32, want: f64) -> f64 {
    let ulp = f32::EPSILON as f64;
    let cancel = match a {
        Activation::Gelu | Activation::GeluTanh => 0.5 * (v as f64).abs() * 4.0 * ulp,
        _ => 0.0,
    };
    8.0 * ulp * want.abs() + cancel + 1e-37
}

const FORMS: [Activation; 6] = [
    Activation::Identity,
    Activation::Relu,
    Activation::Gelu,
    Activation::GeluTanh,
    Activation::Silu,
    Activation::ScaleAdd(0.5),
];

/// Every form, with and without a residual (through C and in place), on `kernel`; returns
/// whether it ran (and whether with stream-K).
fn check_kernel(g: &Gpu, o: &Operands, kernel: Kernel) -> Option<bool> {
    let (v, split) = run(g, o, kernel, Epilogue::scale_add(0.0), false)?;
    let beta = 0.75f32;
    for a in FORMS {
        let (y, _) = run(g, o, kernel, Epilogue::activation(a), false).expect("ran once");
        for (i, (&yi, &vi)) in y.iter().zip(&v).enumerate() {
            match exact(a, vi) {
                Some(want) => assert!(same(yi, want), "{kernel:?} {a:?} [{i}]: {yi:e} vs {want:e} (v = {vi:e})"),
                None => {
                    let want = a.reference(vi as f64);
                    let bound = transcendental_bound(a, vi, want);
                    let err = (yi as f64 - want).abs();
                    assert!(
                        err <= bound,
                        "{kernel:?} {a:?} [{i}]: {yi:e} vs {want:e} (v = {vi:e}): {err:e} > {bound:e}"
                    );
                }
            }
        }
        let with_c = Epilogue::activation(a).with_residual((), beta);
        let (r, _) = run(g, o, kernel, with_c, false).expect("ran once");
        let (r_in_place, _) = run(g, o, kernel, with_c, true).expect("ran once");
        for i in 0..y.len() {
            let c = o.c_at(i / o.n, i % o.n);
            let want = beta.mul_add(c, y[i]);
            assert!(same(r[i], want), "{kernel:?} {a:?} + {beta}·C [{i}]: {:e} vs {want:e}", r[i]);
            assert!(same(r_in_place[i], r[i]), "{kernel:?} {a:?} in place [{i}]: {:e} vs {:e}", r_in_place[i], r[i]);
        }
    }
    Some(split)
}

#[test]
fn every_form_on_every_kernel_is_its_formula_of_the_seed_paths_v() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("every_form_on_every_kernel");
    // (M, N, K, ld of out, ld of C): aligned for TMA, `out` stored through TMA and from
    // registers, C copied in pairs or element by element with either store; odd (repacks);
    // decoding sizes (GEMV, skinny); few tiles and a long K (split-K through the workspace),
    // with either store.
    let shapes = [
        (130, 96, 64, 100, 100),
        (130, 96, 64, 100, 101),
        (130, 96, 64, 99, 99),
        (77, 45, 61, 48, 48),
        (1, 67, 256, 70, 70),
        (8, 200, 512, 203, 203),
        (130, 128, 3072, 131, 131),
        (130, 128, 3072, 132, 132),
    ];
    let mut families = Vec::new();
    let mut stream_k = false;
    for (m, n, k, ld, c_ld) in shapes {
        let o = operands(&g, &mut rng, (m, n, k), ld, c_ld);
        for kernel in Kernel::ALL {
            if let Some(split) = check_kernel(&g, &o, kernel) {
                families.push(kernel.family());
                stream_k |= split;
            }
        }
    }
    let expected: &[Family] = if g.is_hopper() {
        &[Family::MmaSync, Family::TmaWgmma, Family::Skinny, Family::Gemv]
    } else {
        &[Family::MmaSync, Family::Gemv]
    };
    for f in expected {
        assert!(families.contains(f), "no {f:?} kernel ran a case");
    }
    assert!(stream_k, "no case ran with stream-K");
}

/// The unfused baseline's second pass (`CublasBaseline::elementwise`, after cuBLAS's GEMM in the
/// benches) applies the fused kernels' functor: run on a kernel's `acc` (its output with no bias
/// and no `f`), `f(acc + b) + β·C` must equal that kernel's fused output bitwise for every form,
/// with and without `C` (same `acc`, same `v`, same roundings). Dense rows of whole float4s and
/// an odd N (the scalar tail). In place, `C = out` is the `acc` the pass reads.
#[test]
fn the_baselines_elementwise_pass_is_the_fused_epilogue_of_the_same_acc() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("baselines_elementwise_pass");
    let beta = 0.75f32;
    let mut ran = 0;
    for (m, n, k) in [(130, 96, 64), (33, 45, 32), (4, 67, 256)] {
        let up = |v: &[f32]| g.stream.clone_htod(v).expect("upload");
        let x = up(&(0..m * k).map(|_| rng.sym(2.0)).collect::<Vec<_>>());
        let w = up(&(0..n * k).map(|_| rng.sym(2.0 / (k as f32).sqrt())).collect::<Vec<_>>());
        let bias = up(&(0..n).map(|_| rng.sym(1.0)).collect::<Vec<_>>());
        let c = up(&(0..m * n).map(|_| rng.sym(3.0)).collect::<Vec<_>>());
        let (xr, wr, cr) =
            (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k), MatrixRef::from_slice(&c, m, n));
        let b = bias.as_view();
        for kernel in Kernel::ALL {
            let gemm = g.gemm.with_dispatch(Dispatch::Force(kernel));
            // No workspace: nothing split or repacked, so every form's call of the kernel has
            // the same acc.
            let fused = |bias: Option<&CudaView<'_, f32>>, epilogue: Epilogue<&MatrixRef<'_>>| {
                let mut out = g.stream.alloc_zeros::<f32>(m * n).expect("alloc");
                let mut o = MatrixMut::from_slice(&mut out, m, n);
                match gemm.run_gemm(&g.stream, Gemm { x: &xr, w: &wr, bias, epilogue, out: &mut o, workspace: None }) {
                    Ok(_) => Some(g.stream.clone_dtoh(&out).expect("download")),
                    Err(Error::KernelUnavailable { .. }) => None,
                    Err(e) => panic!("{kernel:?}: {e}"),
                }
            };
            let Some(acc) = fused(None, Epilogue::linear()) else { continue };
            let pass = |epilogue: Epilogue<&MatrixRef<'_>>| {
                let mut out = up(&acc);
                let mut o = MatrixMut::from_slice(&mut out, m, n);
                g.baseline.elementwise(Some(&b), epilogue, &mut o).unwrap_or_else(|e| panic!("{kernel:?}: {e}"));
                g.stream.clone_dtoh(&out).expect("download")
            };
            for a in FORMS {
                for epilogue in [Epilogue::activation(a), Epilogue::activation(a).with_residual(&cr, beta)] {
                    let want = fused(Some(&b), epilogue).expect("ran once");
                    let got = pass(epilogue);
                    for (i, (&got, &want)) in got.iter().zip(&want).enumerate() {
                        let with_c = epilogue.residual.is_some();
                        assert!(
                            same(got, want),
                            "{kernel:?} {m}×{n}×{k} {a:?} (C: {with_c}) [{i}]: {got:e} vs {want:e}"
                        );
                    }
                }
                // C = out: the pass reads each acc before the same thread overwrites it.
                let acc_dev = up(&acc);
                let acc_as_c = MatrixRef::from_slice(&acc_dev, m, n);
                let want = pass(Epilogue::activation(a).with_residual(&acc_as_c, beta));
                let got = pass(Epilogue::activation(a).with_residual_out(beta));
                for (i, (&got, &want)) in got.iter().zip(&want).enumerate() {
                    assert!(same(got, want), "{kernel:?} {m}×{n}×{k} {a:?} in place [{i}]: {got:e} vs {want:e}");
                }
            }
            ran += 1;
        }
    }
    assert!(ran > 0, "no kernel ran without a workspace");
}
