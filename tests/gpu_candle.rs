//! `gemm_epilogue::candle::FusedLinear` against an f64 reference, candle's own `Linear` +
//! `(y * s)? + y`, and this crate's `Linear` (the same kernels: bit-identical), on small odd
//! shapes, batch dimensions, strided and transposed inputs; its held workspace; and its errors
//! (which need no GPU).

mod common;

use std::sync::Arc;

use candle_core::{DType, Device, IndexOp, Module, Tensor};
use gemm_epilogue::candle::FusedLinear;
use gemm_epilogue::cudarc::driver::CudaContext;
use gemm_epilogue::testbed::reference::{self, HostMatrix};
use gemm_epilogue::{cuda_context, Error, FusedGemm, Linear};

use common::Rng;
use common::{coeff, ABS_SLACK, NORM_TOL};

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
