//! `gemm_epilogue::candle::FusedLinear` against an f64 reference, candle's own `Linear` +
//! `(y * s)? + y`, and this crate's `Linear` (the same kernels: bit-identical), on small odd
//! shapes, batch dimensions, strided and transposed inputs; its held workspace; and its errors
//! (which need no GPU). Then its other epilogues against candle's own ops and f64:
//! `with_activation` (candle-nn's activations after its `Linear`) and `forward_with_residual`
//! (`act(linear(x)) + c·β`, residuals strided and misused).

mod common;

use std::sync::Arc;

use candle_core::{DType, Device, IndexOp, Module, Tensor};
use gemm_epilogue::candle::FusedLinear;
use gemm_epilogue::cudarc::driver::CudaContext;
use gemm_epilogue::testbed::reference::{self, HostMatrix};
use gemm_epilogue::{cuda_context, Activation, Error, FusedGemm, Linear, MatrixRef};

use common::Rng;
use common::{coeff, ABS_SLACK, MIN_NORM_COUNT, NORM_TOL};

/// candle's device 0 and our context, or `None` after `skipped: …`.
fn candle_gpu() -> Option<(Device, Arc<CudaContext>)> {
    match cuda_context(0) {
        Ok(ctx) => Some((Device::new_cuda(0).expect("candle's CUDA device"), ctx)),
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) if !common::require_gpu() => {
            println!("skipped: {e}");
            None
        }
        Err(e) => panic!("no usable GPU: {e}"),
    }
}

struct Layer {
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
    m: usize,
    k: usize,
    n: usize,
}

fn layer(rng: &mut Rng, m: usize, k: usize, n: usize) -> Layer {
    let a = 1.0 / (k as f32).sqrt();
    Layer {
        x: (0..m * k).map(|_| rng.sym(1.0)).collect(),
        w: (0..n * k).map(|_| rng.sym(a)).collect(),
        b: (0..n).map(|_| rng.sym(a)).collect(),
        m,
        k,
        n,
    }
}

/// Every element of `got` (M × N, row-major) within the TF32 round-to-nearest bound of the f64
/// reference, and the normalised error within the crate's statistical limit.
fn check_against_f64(l: &Layer, s: f32, got: &[f32], what: &str) {
    assert_eq!(got.len(), l.m * l.n, "{what}: output length");
    let (x, w) = (HostMatrix::new(&l.x, l.m, l.k), HostMatrix::new(&l.w, l.n, l.k));
    let c = coeff(2f64.powi(-11), l.k);
    let (mut d2, mut r2) = (0.0, 0.0);
    for r in 0..l.m {
        for col in 0..l.n {
            let e = reference::element(x, w, Some(&l.b), s, r, col);
            let g = got[r * l.n + col] as f64;
            assert!(
                (g - e.value).abs() <= c * e.magnitude + ABS_SLACK,
                "{what}: ({r}, {col}) = {g}, f64 {} (magnitude {})",
                e.value,
                e.magnitude
            );
            d2 += (g - e.value).powi(2);
            r2 += e.value.powi(2);
        }
    }
    let norm = (d2 / r2).sqrt();
    assert!(norm <= NORM_TOL, "{what}: ‖e‖/‖ref‖ = {norm:e}");
}

fn host(t: &Tensor) -> Vec<f32> {
    t.flatten_all().expect("flatten").to_vec1::<f32>().expect("download")
}

#[test]
fn fused_linear_matches_f64_candle_and_our_linear_on_odd_shapes() {
    let Some((dev, ctx)) = candle_gpu() else { return };
    let mut rng = common::rng("fused_linear_matches_f64_candle_and_our_linear_on_odd_shapes");
    // (batch dims, K, N): K % 4 != 0 repacks x, N odd, one row, batches flattened.
    let cases: [(&[usize], usize, usize); 6] =
        [(&[1], 1, 1), (&[13], 37, 29), (&[3, 7], 131, 67), (&[2, 3, 5], 64, 96), (&[257], 130, 33), (&[], 20, 9)];
    for (batch, k, n) in cases {
        let m: usize = batch.iter().product();
        let l = layer(&mut rng, m, k, n);
        let s = rng.sym(2.0);
        let mut dims = batch.to_vec();
        dims.push(k);
        let x = Tensor::from_slice(&l.x, dims.as_slice(), &dev).expect("x");
        let linear = candle_nn::Linear::new(
            Tensor::from_slice(&l.w, (n, k), &dev).expect("w"),
            Some(Tensor::from_slice(&l.b, n, &dev).expect("b")),
        );
        let fused = FusedLinear::from_linear(&linear, s).expect("FusedLinear");
        let out = fused.forward(&x).expect("forward");
        let mut want_dims = batch.to_vec();
        want_dims.push(n);
        assert_eq!(out.dims(), want_dims.as_slice(), "output shape");
        let got = host(&out);
        let what = format!("FusedLinear {batch:?}×{k} → {n}, s = {s}");
        check_against_f64(&l, s, &got, &what);

        // candle's own path, full FP32: within the same bound of f64, so within twice of ours
        // (candle's Linear needs a rank ≥ 2 input).
        if !batch.is_empty() {
            let y = linear.forward(&x).expect("candle Linear");
            let theirs = host(&((&y * s as f64).expect("mul") + &y).expect("add"));
            check_against_f64(&l, s, &theirs, &format!("candle Linear + (y*s)+y {batch:?}×{k} → {n}"));
        }

        // The crate's Linear: the same prepared weight and kernel choice, so the same bits.
        let stream = ctx.default_stream();
        let ours = Linear::new(
            FusedGemm::new(&ctx).expect("gemm"),
            stream.clone_htod(&l.w).expect("w"),
            Some(stream.clone_htod(&l.b).expect("b")),
            k,
            n,
            s,
        )
        .expect("Linear");
        let direct = stream
            .clone_dtoh(&ours.forward(&stream.clone_htod(&l.x).expect("x"), m).expect("forward").expect("non-empty"))
            .expect("download");
        assert!(
            direct.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{what}: differs from Linear::forward"
        );
    }
}

#[test]
fn strided_and_transposed_inputs() {
    let Some((dev, _ctx)) = candle_gpu() else { return };
    let mut rng = common::rng("strided_and_transposed_inputs");
    let (m, k, n, wide) = (45, 67, 31, 75);
    let l = layer(&mut rng, m, k, n);
    let s = -0.75;
    let linear = candle_nn::Linear::new(
        Tensor::from_slice(&l.w, (n, k), &dev).expect("w"),
        Some(Tensor::from_slice(&l.b, n, &dev).expect("b")),
    );
    let fused = FusedLinear::from_linear(&linear, s).expect("FusedLinear");
    let dense = Tensor::from_slice(&l.x, (m, k), &dev).expect("x");

    // A narrow of the last dimension (row stride 75, offset 3), in place.
    let mut padded = vec![f32::NAN; m * wide];
    for r in 0..m {
        padded[r * wide + 3..r * wide + 3 + k].copy_from_slice(&l.x[r * k..(r + 1) * k]);
    }
    let narrowed = Tensor::from_slice(&padded, (m, wide), &dev).expect("padded").narrow(1, 3, k).expect("narrow");
    assert!(!narrowed.is_contiguous());
    check_against_f64(&l, s, &host(&fused.forward(&narrowed).expect("narrowed")), "narrowed x");

    // Every other row of a taller tensor, as (3, 15, K) batches.
    let mut tall = vec![f32::NAN; 2 * m * k];
    for r in 0..m {
        tall[2 * r * k..(2 * r + 1) * k].copy_from_slice(&l.x[r * k..(r + 1) * k]);
    }
    let rows =
        Tensor::from_slice(&tall, (m, 2, k), &dev).expect("tall").i((.., 0, ..)).expect("rows").reshape((3, 15, k));
    // reshape of a non-contiguous tensor copies in candle; take the strided view itself too.
    let every_other = Tensor::from_slice(&tall, (m, 2, k), &dev).expect("tall").i((.., 0, ..)).expect("rows");
    assert!(!every_other.is_contiguous());
    check_against_f64(&l, s, &host(&fused.forward(&every_other).expect("every other row")), "every other row");
    check_against_f64(&l, s, &host(&fused.forward(&rows.expect("reshape")).expect("batched")), "batched rows");

    // Transposed (columns not unit-stride): made contiguous first.
    let xt =
        Tensor::from_slice(&l.x, (m, k), &dev).expect("x").t().expect("t").contiguous().expect("c").t().expect("t");
    assert!(!xt.is_contiguous());
    check_against_f64(&l, s, &host(&fused.forward(&xt).expect("transposed")), "transposed x");

    // Same bits in place as contiguous when the plan is the same kind (dense vs dense copy).
    let again = host(&fused.forward(&dense.copy().expect("copy")).expect("dense"));
    assert_eq!(
        host(&fused.forward(&dense).expect("dense")).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        again.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}

#[test]
fn fused_linear_reuses_its_workspace() {
    let Some((dev, _ctx)) = candle_gpu() else { return };
    let mut rng = common::rng("fused_linear_reuses_its_workspace");
    // K % 4 != 0: every call needs a workspace (x repacked).
    let (k, n) = (4097, 256);
    let l = layer(&mut rng, 512, k, n);
    let linear = candle_nn::Linear::new(Tensor::from_slice(&l.w, (n, k), &dev).expect("w"), None);
    let fused = FusedLinear::from_linear(&linear, 0.5).expect("FusedLinear");
    let x = Tensor::from_slice(&l.x, (512, k), &dev).expect("x");
    assert_eq!(fused.workspace_allocations(), 0);
    fused.forward(&x).expect("first");
    let (allocs, len) = (fused.workspace_allocations(), fused.workspace_len());
    assert_eq!(allocs, 1, "the first call that needs a workspace allocates one");
    for _ in 0..5 {
        fused.forward(&x).expect("repeat");
    }
    assert_eq!(
        (fused.workspace_allocations(), fused.workspace_len()),
        (allocs, len),
        "a repeated shape allocates no workspace"
    );
    // More rows (x repacked: 4× the need): grows once, then holds.
    let big = Tensor::zeros((2048, k), DType::F32, &dev).expect("big");
    fused.forward(&big).expect("bigger");
    fused.forward(&big).expect("bigger again");
    assert_eq!(fused.workspace_allocations(), allocs + 1);
    // Smaller calls fit in what is held.
    fused.forward(&x).expect("first shape again");
    fused.forward(&x.narrow(0, 0, 100).expect("narrow")).expect("fewer rows");
    assert_eq!(fused.workspace_allocations(), allocs + 1, "calls needing less than held allocate nothing");
    assert!(fused.workspace_len() > len);
}

/// Errors need no GPU: a CPU tensor is refused with a candle error, not a panic.
#[test]
fn cpu_tensors_are_a_candle_error() {
    let w = Tensor::zeros((4, 3), DType::F32, &Device::Cpu).expect("w");
    let err = FusedLinear::new(w, None, 0.5).expect_err("a CPU weight must be refused");
    assert!(err.to_string().contains("CUDA"), "{err}");
    let Some((dev, _ctx)) = candle_gpu() else { return };
    let fused = FusedLinear::new(Tensor::zeros((4, 3), DType::F32, &dev).expect("w"), None, 0.5).expect("FusedLinear");
    let cpu_x = Tensor::zeros((2, 3), DType::F32, &Device::Cpu).expect("x");
    assert!(fused.forward(&cpu_x).expect_err("CPU x").to_string().contains("CUDA"));
    let wrong_k = Tensor::zeros((2, 4), DType::F32, &dev).expect("x");
    assert!(fused.forward(&wrong_k).expect_err("K mismatch").to_string().contains("in_features"));
    let f16 = Tensor::zeros((2, 3), DType::F16, &dev).expect("x");
    assert!(fused.forward(&f16).expect_err("f16").to_string().contains("f32"));
    let bad_bias = Tensor::zeros(5, DType::F32, &dev).expect("b");
    assert!(FusedLinear::new(Tensor::zeros((4, 3), DType::F32, &dev).expect("w"), Some(bad_bias), 0.5).is_err());
}

// ---- Other epilogues: with_activation, and forward_with_residual (f(v) + β·C) ----

/// candle's own `f(y)` for an activation of ours: candle-nn's `Activation` (its `Gelu` is
/// `gelu_erf`, our `Gelu`; `GeluPytorchTanh` is `Tensor::gelu`, our `GeluTanh`).
fn candle_activation(a: Activation, y: &Tensor) -> Tensor {
    let t = match a {
        Activation::ScaleAdd(s) => (y * s as f64).and_then(|t| t + y),
        Activation::Identity => Ok(y.clone()),
        Activation::Relu => candle_nn::Activation::Relu.forward(y),
        Activation::Gelu => candle_nn::Activation::Gelu.forward(y),
        Activation::GeluTanh => candle_nn::Activation::GeluPytorchTanh.forward(y),
        Activation::Silu => candle_nn::Activation::Silu.forward(y),
        a => panic!("no candle expression for {a:?}"),
    };
    t.expect("candle activation")
}

const ACTIVATIONS: [Activation; 6] = [
    Activation::ScaleAdd(-0.75),
    Activation::Identity,
    Activation::Relu,
    Activation::Gelu,
    Activation::GeluTanh,
    Activation::Silu,
];

/// One element of `f(v) + β·c` in f64 and how far a TF32 result may lie from it:
/// |f(v̂) − f(v)| ≤ L·|v̂ − v|, |v̂ − v| ≤ coeff(2⁻¹¹, K)·A (the bound `check_against_f64`
/// holds `v` to, A = Σ|x||w| + |b|), L ≥ |f′|: 1 + |s| for `v·s + v`, 1 for ReLU, 1.13 for GELU
/// (both forms: 1.129) and SiLU (1.100); then f's own fp32 rounding (eight ulps of f(v), and
/// GELU's `1 + erf` / `1 + tanh` cancellation at negative v, as tests/gpu_epilogue.rs bounds it)
/// and the residual's add (eight ulps of |f(v)| + |β·c|).
struct Want {
    value: f64,
    bound: f64,
}

fn wants(l: &Layer, bias: bool, a: Activation, residual: Option<(&[f32], f32)>) -> Vec<Want> {
    let (x, w) = (HostMatrix::new(&l.x, l.m, l.k), HostMatrix::new(&l.w, l.n, l.k));
    let lipschitz = match a {
        Activation::ScaleAdd(s) => 1.0 + s.abs() as f64,
        Activation::Identity | Activation::Relu => 1.0,
        _ => 1.13,
    };
    let ulp = f32::EPSILON as f64;
    let mut out = Vec::with_capacity(l.m * l.n);
    for r in 0..l.m {
        for col in 0..l.n {
            let e = reference::element(x, w, bias.then_some(l.b.as_slice()), 0.0, r, col);
            let fv = a.reference(e.value);
            let bc = residual.map_or(0.0, |(c, beta)| beta as f64 * c[r * l.n + col] as f64);
            let cancel = match a {
                Activation::Gelu | Activation::GeluTanh => 2.0 * e.value.abs() * ulp,
                _ => 0.0,
            };
            let rounding = 8.0 * ulp * (fv.abs() + bc.abs()) + cancel;
            let bound = lipschitz * coeff(2f64.powi(-11), l.k) * e.magnitude + rounding + ABS_SLACK;
            out.push(Want { value: fv + bc, bound });
        }
    }
    out
}

/// Every element within its bound of f64 (`slack` × the bound: 2 for the difference of two
/// results each within it), and, over enough elements, ‖e‖/‖ref‖ within the crate's limit.
fn check_wants(wants: &[Want], got: &[f32], reference: Option<&[f32]>, slack: f64, what: &str) {
    assert_eq!(got.len(), wants.len(), "{what}: output length");
    let (mut d2, mut r2) = (0.0, 0.0);
    for (i, (w, &g)) in wants.iter().zip(got).enumerate() {
        let want = reference.map_or(w.value, |r| r[i] as f64);
        let g = g as f64;
        assert!((g - want).abs() <= slack * w.bound, "{what}: [{i}] = {g:e}, want {want:e} (bound {:e})", w.bound);
        d2 += (g - w.value).powi(2);
        r2 += w.value.powi(2);
    }
    // A few elements can cancel (f(v) ≈ −β·c) and dominate ‖ref‖: as the harness, from 256 on.
    if wants.len() >= MIN_NORM_COUNT {
        let norm = (d2 / r2).sqrt();
        assert!(norm <= NORM_TOL, "{what}: ‖e‖/‖ref‖ = {norm:e}");
    }
}

/// (batch dims, K, N): K % 4 != 0 repacks x, N odd, one row, batches flattened, a vector.
const ODD_SHAPES: [(&[usize], usize, usize); 6] =
    [(&[1], 1, 1), (&[13], 37, 29), (&[3, 7], 131, 67), (&[2, 3, 5], 64, 96), (&[257], 130, 33), (&[], 20, 9)];

fn candle_linear(l: &Layer, bias: bool, dev: &Device) -> candle_nn::Linear {
    candle_nn::Linear::new(
        Tensor::from_slice(&l.w, (l.n, l.k), dev).expect("w"),
        bias.then(|| Tensor::from_slice(&l.b, l.n, dev).expect("b")),
    )
}

fn dims(batch: &[usize], last: usize) -> Vec<usize> {
    let mut d = batch.to_vec();
    d.push(last);
    d
}

#[test]
fn with_activation_matches_candle_activations_and_f64() {
    let Some((dev, _ctx)) = candle_gpu() else { return };
    let mut rng = common::rng("with_activation_matches_candle_activations_and_f64");
    for (i, (batch, k, n)) in ODD_SHAPES.into_iter().enumerate() {
        let l = layer(&mut rng, batch.iter().product(), k, n);
        let x = Tensor::from_slice(&l.x, dims(batch, k).as_slice(), &dev).expect("x");
        for (j, a) in ACTIVATIONS.into_iter().enumerate() {
            let bias = (i + j) % 2 == 0;
            let linear = candle_linear(&l, bias, &dev);
            let fused = FusedLinear::from_linear(&linear, 0.5).expect("FusedLinear").with_activation(a);
            assert_eq!(fused.activation(), a);
            let out = fused.forward(&x).expect("forward");
            assert_eq!(out.dims(), dims(batch, n).as_slice(), "output shape");
            let what = format!("{a:?} {batch:?}×{k} → {n}, bias {bias}");
            let want = wants(&l, bias, a, None);
            let got = host(&out);
            check_wants(&want, &got, None, 1.0, &what);
            // candle's Linear then its activation (rank ≥ 2): within the bound of f64, so
            // within twice the bound of ours.
            if !batch.is_empty() {
                let theirs = host(&candle_activation(a, &linear.forward(&x).expect("candle Linear")));
                check_wants(&want, &theirs, None, 1.0, &format!("candle's {what}"));
                check_wants(&want, &got, Some(&theirs), 2.0, &format!("ours vs candle's {what}"));
            }
        }
    }
}

#[test]
fn forward_with_residual_matches_candle_and_f64_on_odd_shapes() {
    let Some((dev, ctx)) = candle_gpu() else { return };
    let mut rng = common::rng("forward_with_residual_matches_candle_and_f64_on_odd_shapes");
    for (i, (batch, k, n)) in ODD_SHAPES.into_iter().enumerate() {
        let m: usize = batch.iter().product();
        let l = layer(&mut rng, m, k, n);
        let c_host: Vec<f32> = (0..m * n).map(|_| rng.sym(1.0)).collect();
        let x = Tensor::from_slice(&l.x, dims(batch, k).as_slice(), &dev).expect("x");
        let c = Tensor::from_slice(&c_host, dims(batch, n).as_slice(), &dev).expect("c");
        for (j, a) in ACTIVATIONS.into_iter().enumerate() {
            // β = 1 (exactly f(v) + C), a negative one, a random one; with and without a bias
            // (the op on x, b and C; on x and C).
            let beta = [1.0, -0.5, rng.sym(2.0)][j % 3];
            let bias = (i + j) % 2 == 1;
            let linear = candle_linear(&l, bias, &dev);
            let fused = FusedLinear::from_linear(&linear, 0.5).expect("FusedLinear").with_activation(a);
            let out = fused.forward_with_residual(&x, &c, beta).expect("forward_with_residual");
            assert_eq!(out.dims(), dims(batch, n).as_slice(), "output shape");
            let what = format!("{a:?} + {beta}·C, {batch:?}×{k} → {n}, bias {bias}");
            let want = wants(&l, bias, a, Some((&c_host, beta)));
            let got = host(&out);
            check_wants(&want, &got, None, 1.0, &what);
            // candle: (act(linear(x)) + (c * β)), within the bound of f64 and of ours.
            if !batch.is_empty() {
                let y = candle_activation(a, &linear.forward(&x).expect("candle Linear"));
                let theirs = host(&(y + (&c * beta as f64).expect("c·β")).expect("add"));
                check_wants(&want, &theirs, None, 1.0, &format!("candle's {what}"));
                check_wants(&want, &got, Some(&theirs), 2.0, &format!("ours vs candle's {what}"));
            }
            // The crate's Linear with the same residual: the same kernel, the same bits.
            let stream = ctx.default_stream();
            let ours = Linear::new(
                FusedGemm::new(&ctx).expect("gemm"),
                stream.clone_htod(&l.w).expect("w"),
                bias.then(|| stream.clone_htod(&l.b).expect("b")),
                k,
                n,
                0.5,
            )
            .expect("Linear")
            .with_activation(a);
            let c_dev = stream.clone_htod(&c_host).expect("c");
            let direct = ours
                .forward_with_residual(
                    &stream.clone_htod(&l.x).expect("x"),
                    m,
                    &MatrixRef::from_slice(&c_dev, m, n),
                    beta,
                )
                .expect("Linear::forward_with_residual")
                .expect("non-empty");
            let direct = stream.clone_dtoh(&direct).expect("download");
            assert!(bits(&direct) == bits(&got), "{what}: differs from Linear::forward_with_residual");
        }
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn forward_with_residual_reads_strided_residuals() {
    let Some((dev, _ctx)) = candle_gpu() else { return };
    let mut rng = common::rng("forward_with_residual_reads_strided_residuals");
    let (m, k, n, wide) = (45, 67, 31, 38);
    let l = layer(&mut rng, m, k, n);
    let c_host: Vec<f32> = (0..m * n).map(|_| rng.sym(1.0)).collect();
    let (a, beta) = (Activation::Gelu, 0.75);
    let fused = FusedLinear::from_linear(&candle_linear(&l, true, &dev), 0.5).expect("FusedLinear").with_activation(a);
    let x = Tensor::from_slice(&l.x, (m, k), &dev).expect("x");
    let dense_c = Tensor::from_slice(&c_host, (m, n), &dev).expect("c");
    let want = wants(&l, true, a, Some((&c_host, beta)));
    let dense = host(&fused.forward_with_residual(&x, &dense_c, beta).expect("dense C"));
    check_wants(&want, &dense, None, 1.0, "dense C");
    // The epilogue reads C element by element: its layout changes no bit of the result.
    let same = |c: &Tensor, what: &str| {
        let got = host(&fused.forward_with_residual(&x, c, beta).expect(what));
        assert!(bits(&got) == bits(&dense), "{what}: differs from the dense C's result");
    };

    // A narrow of the last dimension (row stride 38, offset 3: rows not 16-byte aligned), NaN
    // around it: read in place, the padding never.
    let mut padded = vec![f32::NAN; m * wide];
    for r in 0..m {
        padded[r * wide + 3..r * wide + 3 + n].copy_from_slice(&c_host[r * n..(r + 1) * n]);
    }
    let narrowed = Tensor::from_slice(&padded, (m, wide), &dev).expect("padded").narrow(1, 3, n).expect("narrow");
    assert!(!narrowed.is_contiguous());
    same(&narrowed, "narrowed C");

    // Every other row of a taller tensor.
    let mut tall = vec![f32::NAN; 2 * m * n];
    for r in 0..m {
        tall[2 * r * n..(2 * r + 1) * n].copy_from_slice(&c_host[r * n..(r + 1) * n]);
    }
    let tall = Tensor::from_slice(&tall, (m, 2, n), &dev).expect("tall");
    let every_other = tall.i((.., 0, ..)).expect("rows");
    assert!(!every_other.is_contiguous());
    same(&every_other, "every other row of C");

    // Transposed (columns not unit-stride): made contiguous first.
    let ct = Tensor::from_slice(&c_host, (m, n), &dev).expect("c").t().expect("t").contiguous().expect("c").t();
    let ct = ct.expect("t");
    assert!(!ct.is_contiguous());
    same(&ct, "transposed C");

    // Batches: x (3, 15, K) with C every other row of (3, 15, 2, N), both flattened to 45 rows.
    let xb = x.reshape((3, 15, k)).expect("x batches");
    let cb = tall.reshape((3, 15, 2, n)).expect("c batches").i((.., .., 0, ..)).expect("rows");
    assert!(!cb.is_contiguous());
    let got = fused.forward_with_residual(&xb, &cb, beta).expect("batched");
    assert_eq!(got.dims(), [3, 15, n]);
    assert!(bits(&host(&got)) == bits(&dense), "batched strided C: differs from the dense C's result");
}

/// Misuse is a candle error, never a panic: the residual on the CPU, of another dtype or shape
/// (rank, batch split, transposed), x on the CPU next to a CUDA residual; and `Linear`'s
/// residual of another shape.
#[test]
fn forward_with_residual_misuse_is_a_candle_error() {
    let Some((dev, ctx)) = candle_gpu() else { return };
    let (k, n) = (4, 5);
    let fused = FusedLinear::new(Tensor::zeros((n, k), DType::F32, &dev).expect("w"), None, 0.5).expect("FusedLinear");
    let x = Tensor::zeros((2, 3, k), DType::F32, &dev).expect("x");
    let good = Tensor::zeros((2, 3, n), DType::F32, &dev).expect("c");
    assert_eq!(fused.forward_with_residual(&x, &good, 1.0).expect("good").dims(), [2, 3, n]);
    let err = |c: &Tensor, what: &str, word: &str| {
        let e = fused.forward_with_residual(&x, c, 1.0).expect_err(what).to_string();
        assert!(e.contains(word), "{what}: {e}");
    };
    err(&Tensor::zeros((2, 3, n), DType::F32, &Device::Cpu).expect("c"), "CPU residual", "CUDA");
    err(&Tensor::zeros((2, 3, n), DType::F16, &dev).expect("c"), "f16 residual", "f32");
    err(&Tensor::zeros((2, 3, n), DType::F64, &dev).expect("c"), "f64 residual", "f32");
    err(&Tensor::zeros((2, 3, n + 1), DType::F32, &dev).expect("c"), "wider residual", "shape");
    err(&Tensor::zeros((6, n), DType::F32, &dev).expect("c"), "flattened residual", "shape");
    err(&Tensor::zeros((3, 2, n), DType::F32, &dev).expect("c"), "other batches", "shape");
    err(&Tensor::zeros((2, n, 3), DType::F32, &dev).expect("c"), "transposed residual", "shape");
    err(&Tensor::zeros(n, DType::F32, &dev).expect("c"), "broadcastable residual", "shape");
    let cpu_x = Tensor::zeros((2, 3, k), DType::F32, &Device::Cpu).expect("x");
    assert!(fused.forward_with_residual(&cpu_x, &good, 1.0).expect_err("CPU x").to_string().contains("CUDA"));

    let stream = ctx.default_stream();
    let linear =
        Linear::new(FusedGemm::new(&ctx).expect("gemm"), stream.alloc_zeros(n * k).expect("w"), None, k, n, 0.5)
            .expect("Linear");
    let (x, c) = (stream.alloc_zeros::<f32>(6 * k).expect("x"), stream.alloc_zeros::<f32>(8 * n).expect("c"));
    for (rows, cols) in [(7, n), (6, n + 1)] {
        let e = linear.forward_with_residual(&x, 6, &MatrixRef::new(c.slice(0..rows * cols), rows, cols), 1.0);
        assert!(matches!(e, Err(Error::ShapeMismatch { .. })), "{rows} × {cols}: {e:?}");
    }
}
