//! A BERT-base MLP block in candle, fp32, both ways, on candle's CUDA tensors:
//!
//! ```text
//! h   = gelu(x·W1ᵀ + b1)        768 → 3072, GELU with erf (BERT's)
//! out = h·W2ᵀ + b2 + x          3072 → 768, plus the residual x
//! ```
//!
//! - candle's own layers: `candle_nn::Linear`, `Tensor::gelu_erf` (what
//!   `candle_nn::Activation::Gelu` runs; `Tensor::gelu` is the tanh form), `candle_nn::Linear`,
//!   `+ x`: two cuBLAS GEMMs, two bias adds, the GELU and the residual add;
//! - ours: two `gemm_epilogue::candle::FusedLinear` layers, the first
//!   `with_activation(Activation::Gelu)` (erf, PyTorch's `F.gelu`), the second
//!   `forward_with_residual(&h, &x, 1.0)` (`Identity` + x): two kernels.
//!
//! Both at TF32: candle with `set_gemm_reduced_precision_f32(true)` (cuBLAS's TF32), ours with
//! its default `Precision::Tf32` (operands rounded to nearest). x is 8 × 512 tokens × 768
//! (`--batch`, `--seq`), x ~ U(−1, 1), W and b ~ U(−1/√K, 1/√K) (nn.Linear's initialisation).
//!
//! ```text
//! eval "$(bash .ci/candle-env)"   # nvcc, CUDA_COMPUTE_CAP and the libraries candle's build needs
//! cargo run --release --features candle --example candle_bert_mlp -- [--batch 8] [--seq 512]
//!     [--reps 30] [--seed N]
//! ```
//!
//! Accuracy: ‖e‖/‖ref‖ of each path against an f64 reference computed on the host for 16
//! sampled rows (x row → h in f64 → out in f64), and the largest difference between the two
//! paths over every element. Timing: CUDA events on candle's stream, the two paths interleaved
//! (`testbed::timing::interleaved`: 3 warm-up calls and ~100 ms of both in turn, then `reps`
//! rounds of one sample per path in balanced orders); medians. Without a usable GPU it prints
//! `skipped: …` and exits 0; exit code 1 when a path's normalised error exceeds 1e-3 or a run
//! fails, 2 on a bad command line.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use candle_core::{Device, Module, Tensor};
use gemm_epilogue::candle::FusedLinear;
use gemm_epilogue::testbed::reference::SplitMix64 as Rng;
use gemm_epilogue::testbed::timing;
use gemm_epilogue::{cuda_context, Activation, Error};

const USAGE: &str = "\
usage: candle_bert_mlp [--batch B] [--seq S] [--reps R] [--seed SEED]

  h = gelu(x·W1ᵀ + b1), out = h·W2ᵀ + b2 + x   (x: B × S × 768, W1: 3072 × 768, W2: 768 × 3072)
  candle's Linear + gelu_erf + Linear + add   vs   FusedLinear(Gelu) + FusedLinear(+ x)

  --batch B     sequences (default 8)
  --seq S       tokens per sequence (default 512)
  --reps R      interleaved timing rounds (default 30)
  --seed SEED   input seed (default: fresh each run)";

const HIDDEN: usize = 768;
const INNER: usize = 3072;
const SAMPLE_ROWS: usize = 16;
const NORM_ERR_LIMIT: f64 = 1e-3;

struct Opts {
    batch: usize,
    seq: usize,
    reps: usize,
    seed: Option<u64>,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts { batch: 8, seq: 512, reps: 30, seed: None };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--batch" => o.batch = num(value()?)?,
            "--seq" => o.seq = num(value()?)?,
            "--reps" => o.reps = num(value()?)?,
            "--seed" => o.seed = Some(value()?.parse().map_err(|e| format!("--seed: {e}"))?),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if o.batch == 0 || o.seq == 0 || o.reps == 0 {
        return Err("--batch, --seq and --reps must be at least 1".into());
    }
    Ok(Some(o))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Our own check first: a machine without a driver or GPU gets a message, not a panic.
    if let Err(e @ (Error::NoDriver | Error::NoDevice { .. })) = cuda_context(0) {
        println!("skipped: no usable GPU: {e}");
        return ExitCode::SUCCESS;
    }
    match run(&o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `rows × cols` values of U(−a, a).
fn uniform(rng: &mut Rng, len: usize, a: f32) -> Vec<f32> {
    (0..len).map(|_| rng.sym(a)).collect()
}

/// `out` for row `r` of x, in f64: `h = gelu(x_r·W1ᵀ + b1)`, `out = h·W2ᵀ + b2 + x_r`.
fn reference_row(x: &[f32], w1: &[f32], b1: &[f32], w2: &[f32], b2: &[f32], r: usize) -> Vec<f64> {
    let xr = &x[r * HIDDEN..(r + 1) * HIDDEN];
    let dot = |a: &[f32], b: &[f64]| a.iter().zip(b).map(|(&p, &q)| p as f64 * q).sum::<f64>();
    let x64: Vec<f64> = xr.iter().map(|&v| v as f64).collect();
    let h: Vec<f64> = (0..INNER)
        .map(|j| Activation::Gelu.reference(dot(&w1[j * HIDDEN..(j + 1) * HIDDEN], &x64) + b1[j] as f64))
        .collect();
    (0..HIDDEN).map(|c| dot(&w2[c * INNER..(c + 1) * INNER], &h) + b2[c] as f64 + x64[c]).collect()
}

/// ‖got − ref‖ / ‖ref‖ over the sampled rows (all of their columns).
fn norm_error(got: &[f32], refs: &[(usize, Vec<f64>)]) -> f64 {
    let (mut d2, mut r2) = (0.0f64, 0.0f64);
    for (r, want) in refs {
        for (c, &w) in want.iter().enumerate() {
            d2 += (got[r * HIDDEN + c] as f64 - w).powi(2);
            r2 += w * w;
        }
    }
    (d2 / r2.max(f64::MIN_POSITIVE)).sqrt()
}

fn run(o: &Opts) -> candle_core::Result<bool> {
    let dev = Device::new_cuda(0)?;
    let cuda = dev.as_cuda_device()?;
    candle_core::cuda_backend::set_gemm_reduced_precision_f32(true);
    let seed =
        o.seed.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64));
    let mut rng = Rng::new(seed);
    let m = o.batch * o.seq;
    let x_host = uniform(&mut rng, m * HIDDEN, 1.0);
    let (a1, a2) = (1.0 / (HIDDEN as f32).sqrt(), 1.0 / (INNER as f32).sqrt());
    let (w1, b1) = (uniform(&mut rng, INNER * HIDDEN, a1), uniform(&mut rng, INNER, a1));
    let (w2, b2) = (uniform(&mut rng, HIDDEN * INNER, a2), uniform(&mut rng, HIDDEN, a2));
    let x = Tensor::from_slice(&x_host, (o.batch, o.seq, HIDDEN), &dev)?;
    let fc1 = candle_nn::Linear::new(
        Tensor::from_slice(&w1, (INNER, HIDDEN), &dev)?,
        Some(Tensor::from_slice(&b1, INNER, &dev)?),
    );
    let fc2 = candle_nn::Linear::new(
        Tensor::from_slice(&w2, (HIDDEN, INNER), &dev)?,
        Some(Tensor::from_slice(&b2, HIDDEN, &dev)?),
    );
    let candle_mlp = || -> candle_core::Result<Tensor> { fc2.forward(&fc1.forward(&x)?.gelu_erf()?)? + &x };
    let fused1 = FusedLinear::from_linear(&fc1, 0.0)?.with_activation(Activation::Gelu);
    let fused2 = FusedLinear::from_linear(&fc2, 0.0)?.with_activation(Activation::Identity);
    let ours_mlp = || -> candle_core::Result<Tensor> { fused2.forward_with_residual(&fused1.forward(&x)?, &x, 1.0) };

    // Agreement: both against f64 on sampled rows, and ours against candle's everywhere.
    let ours = ours_mlp()?.flatten_all()?.to_vec1::<f32>()?;
    let theirs = candle_mlp()?.flatten_all()?.to_vec1::<f32>()?;
    let refs: Vec<(usize, Vec<f64>)> =
        (0..SAMPLE_ROWS).map(|_| rng.below(m)).map(|r| (r, reference_row(&x_host, &w1, &b1, &w2, &b2, r))).collect();
    let (err_ours, err_theirs) = (norm_error(&ours, &refs), norm_error(&theirs, &refs));
    let finite = ours.iter().chain(&theirs).all(|v| v.is_finite());
    let (mut d2, mut t2, mut max_diff) = (0.0f64, 0.0f64, 0.0f32);
    for (a, b) in ours.iter().zip(&theirs) {
        d2 += ((a - b) as f64).powi(2);
        t2 += (*b as f64).powi(2);
        max_diff = max_diff.max((a - b).abs());
    }

    // Timing, interleaved on candle's stream; outputs are dropped (freed stream-ordered).
    let stream = cuda.cuda_stream();
    let mut failure: Option<candle_core::Error> = None;
    let timing = timing::interleaved(
        stream.context(),
        &stream,
        2,
        |_| false,
        o.reps,
        100.0,
        |i| {
            let r = if i == 0 { ours_mlp() } else { candle_mlp() };
            if let Err(e) = r {
                failure.get_or_insert(e);
            }
            Ok(())
        },
    )
    .map_err(|e| candle_core::Error::Msg(format!("timing: {e}")))?;
    if let Some(e) = failure {
        return Err(e);
    }

    println!(
        "BERT-base MLP, fp32: x {}×{}×{HIDDEN}, {HIDDEN} → {INNER} (erf GELU) → {HIDDEN} + x; seed={seed}",
        o.batch, o.seq
    );
    println!(
        "{} rounds of {} calls per sample; errors on {SAMPLE_ROWS} sampled rows against f64",
        timing.rounds, timing.batch
    );
    let t = |i: usize| timing.median_ms[i].unwrap_or(f64::NAN);
    let base = t(1);
    println!("| variant | precision | median ms | / candle | ‖e‖/‖ref‖ vs f64 |");
    println!("|---|---|---:|---:|---:|");
    let rows = [
        (
            "ours: FusedLinear(Gelu), FusedLinear + x (2 kernels)",
            "TF32, operands rounded (Precision::Tf32)",
            t(0),
            err_ours,
        ),
        (
            "candle: Linear, gelu_erf, Linear, + x",
            "TF32 (cuBLAS, set_gemm_reduced_precision_f32(true))",
            t(1),
            err_theirs,
        ),
    ];
    for (label, precision, ms, err) in rows {
        println!("| {label} | {precision} | {ms:.4} | {:.3}× | {err:.3e} |", ms / base);
    }
    println!(
        "ours vs candle (all {} elements): max |diff| {max_diff:.3e}, ‖diff‖/‖candle‖ {:.3e}",
        ours.len(),
        (d2 / t2.max(f64::MIN_POSITIVE)).sqrt()
    );
    let ok = finite && err_ours <= NORM_ERR_LIMIT && err_theirs <= NORM_ERR_LIMIT;
    if !ok {
        println!("FAILED: a normalised error above {NORM_ERR_LIMIT:e} against f64, or a non-finite element");
    }
    Ok(ok)
}
