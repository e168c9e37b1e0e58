//! The seed model written in candle both ways, on candle's CUDA tensors: candle's own `Linear`
//! then `(y * s)? + y` (with and without the seed model's clone of y, a `copy()`), and
//! `gemm_epilogue::candle::FusedLinear` (one kernel). Checks that they agree with an f64
//! reference within the TF32 bounds and times them interleaved.
//!
//! ```text
//! eval "$(bash .ci/candle-env)"   # nvcc, CUDA_COMPUTE_CAP and the libraries candle's build needs
//! cargo run --release --features candle --example candle_seed_model -- [--m 16384] [--k 4096]
//!     [--n 4096] [--scale 0.5] [--reps 20] [--seed N] [--candle-fp32] [--precision tf32|tf32x3|tf32-truncated]
//! ```
//!
//! Compare like with like: by default candle's f32 matmul runs with TF32 on
//! (`set_gemm_reduced_precision_f32(true)`, cuBLAS's TF32, operands rounded) against ours with
//! `Precision::Tf32`; `--candle-fp32` leaves candle at full FP32 (its default) and is meant with
//! `--precision tf32x3`. The table says which. Timing: CUDA events on candle's stream, 3 warm-up
//! calls and ~100 ms of all variants in turn, then `reps` rounds of one sample per variant in
//! balanced orders; medians. Exit code 1 when a result has a normalised error above 1e-3
//! against f64 (or no usable GPU), 2 on a bad command line.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use candle_core::{Device, Module, Tensor};
use gemm_epilogue::candle::FusedLinear;
use gemm_epilogue::testbed::reference::{self, HostMatrix, SplitMix64 as Rng};
use gemm_epilogue::testbed::timing;
use gemm_epilogue::{cuda_context, Error, FusedGemm, Precision};

const USAGE: &str = "\
usage: candle_seed_model [--m M] [--k K] [--n N] [--scale S] [--reps R] [--seed SEED]
                         [--candle-fp32] [--precision tf32|tf32x3|tf32-truncated]

  candle: y = Linear(x); out = (y * s)? + y     vs     FusedLinear: out in one kernel
  (x: M×K, W: N×K, b: N, f32)

  --m M, --k K, --n N  shape (default 16384, 4096, 4096: the seed model)
  --scale S            s (default 0.5)
  --reps R             interleaved timing rounds (default 20)
  --seed SEED          input seed (default: fresh each run)
  --candle-fp32        candle's matmul at full FP32 (its default); otherwise TF32 (rounded)
  --precision P        ours: tf32 (default), tf32x3 (FP32-accurate), tf32-truncated";

const NORM_ERR_LIMIT: f64 = 1e-3;
const SAMPLES: usize = 256;

struct Opts {
    m: usize,
    k: usize,
    n: usize,
    scale: f32,
    reps: usize,
    seed: Option<u64>,
    candle_fp32: bool,
    precision: Precision,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        m: 16384,
        k: 4096,
        n: 4096,
        scale: 0.5,
        reps: 20,
        seed: None,
        candle_fp32: false,
        precision: Precision::Tf32,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--m" => o.m = num(value()?)?,
            "--k" => o.k = num(value()?)?,
            "--n" => o.n = num(value()?)?,
            "--reps" => o.reps = num(value()?)?,
            "--seed" => o.seed = Some(value()?.parse().map_err(|e| format!("--seed: {e}"))?),
            "--scale" => o.scale = value()?.parse().map_err(|e| format!("--scale: {e}"))?,
            "--candle-fp32" => o.candle_fp32 = true,
            "--precision" => {
                o.precision = match value()?.as_str() {
                    "tf32" => Precision::Tf32,
                    "tf32x3" => Precision::Tf32x3,
                    "tf32-truncated" => Precision::Tf32Truncated,
                    p => return Err(format!("--precision: unknown `{p}`")),
                }
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if o.m == 0 || o.n == 0 || o.k == 0 || o.reps == 0 || !o.scale.is_finite() {
        return Err("--m, --n, --k and --reps must be at least 1, --scale finite".into());
    }
    Ok(Some(o))
}

/// Errors of one variant against the f64 reference on the sampled elements.
struct Accuracy {
    norm: f64,
    max_rel: f64,
    finite: bool,
}

fn accuracy(got: &[f32], n: usize, refs: &[((usize, usize), reference::RefElement)]) -> Accuracy {
    let (mut d2, mut r2, mut max_rel, mut finite) = (0.0, 0.0, 0.0f64, true);
    for &((r, c), e) in refs {
        let g = got[r * n + c] as f64;
        finite &= g.is_finite();
        d2 += (g - e.value).powi(2);
        r2 += e.value.powi(2);
        max_rel = max_rel.max((g - e.value).abs() / e.magnitude.max(f64::MIN_POSITIVE));
    }
    Accuracy { norm: (d2 / r2.max(f64::MIN_POSITIVE)).sqrt(), max_rel, finite }
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
    // Our own check first: a machine without a driver gets a message, not a panic.
    if let Err(e @ (Error::NoDriver | Error::NoDevice { .. })) = cuda_context(0) {
        println!("skipped: no usable GPU: {e}");
        return ExitCode::FAILURE;
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

fn run(o: &Opts) -> candle_core::Result<bool> {
    let dev = Device::new_cuda(0)?;
    let cuda = dev.as_cuda_device()?;
    candle_core::cuda_backend::set_gemm_reduced_precision_f32(!o.candle_fp32);
    let seed =
        o.seed.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64));
    let mut rng = Rng::new(seed);
    // The distributions of the crate's tests: x ~ U(0,1), W, b ~ U(-1/√K, 1/√K).
    let a = 1.0 / (o.k as f32).sqrt();
    let x_host: Vec<f32> = (0..o.m * o.k).map(|_| rng.unit()).collect();
    let w_host: Vec<f32> = (0..o.n * o.k).map(|_| rng.sym(a)).collect();
    let b_host: Vec<f32> = (0..o.n).map(|_| rng.sym(a)).collect();
    let x = Tensor::from_slice(&x_host, (o.m, o.k), &dev)?;
    let linear = candle_nn::Linear::new(
        Tensor::from_slice(&w_host, (o.n, o.k), &dev)?,
        Some(Tensor::from_slice(&b_host, o.n, &dev)?),
    );
    let s = o.scale as f64;
    let candle_seed = |copy: bool| -> candle_core::Result<Tensor> {
        let y = linear.forward(&x)?;
        let residual = if copy { y.copy()? } else { y.clone() };
        (&y * s)? + residual
    };
    let gemm = FusedGemm::new(cuda.cuda_stream().context())?.with_precision(o.precision);
    let fused = FusedLinear::with_gemm(gemm, linear.weight().clone(), linear.bias().cloned(), o.scale)?;

    // Agreement: every variant against f64 on sampled elements, and ours against candle's.
    let ours = fused.forward(&x)?.flatten_all()?.to_vec1::<f32>()?;
    let theirs = candle_seed(true)?.flatten_all()?.to_vec1::<f32>()?;
    let (xm, wm) = (HostMatrix::new(&x_host, o.m, o.k), HostMatrix::new(&w_host, o.n, o.k));
    let refs: Vec<_> = (0..SAMPLES)
        .map(|_| {
            let (r, c) = (rng.below(o.m), rng.below(o.n));
            ((r, c), reference::element(xm, wm, Some(&b_host), o.scale, r, c))
        })
        .collect();
    let (acc_ours, acc_theirs) = (accuracy(&ours, o.n, &refs), accuracy(&theirs, o.n, &refs));
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
        3,
        |_| false,
        o.reps,
        100.0,
        |i| {
            let r = match i {
                0 => fused.forward(&x).map(drop),
                1 => candle_seed(false).map(drop),
                _ => candle_seed(true).map(drop),
            };
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

    let candle_mode = if o.candle_fp32 {
        "full FP32 (candle's default)"
    } else {
        "TF32, rounded (set_gemm_reduced_precision_f32(true))"
    };
    println!("seed model M={} K={} N={} s={} seed={seed}", o.m, o.k, o.n, o.scale);
    println!(
        "candle matmul: {candle_mode}; ours: {:?}; {} rounds of {} calls per sample",
        o.precision, timing.rounds, timing.batch
    );
    let t = |i: usize| timing.median_ms[i].unwrap_or(f64::NAN);
    let base = t(2);
    println!("| variant | ms | / candle Linear + copy + mul + add | ‖e‖/‖ref‖ vs f64 | max |e|/magnitude |");
    println!("|---|---:|---:|---:|---:|");
    let rows = [
        ("FusedLinear (1 kernel)", t(0), Some(&acc_ours)),
        ("candle Linear + mul + add", t(1), None),
        ("candle Linear + copy + mul + add (seed model)", t(2), Some(&acc_theirs)),
    ];
    for (label, ms, acc) in rows {
        let (norm, max_rel) = acc.map_or(("same as below".to_string(), String::new()), |a| {
            (format!("{:.3e}", a.norm), format!("{:.3e}", a.max_rel))
        });
        println!("| {label} | {ms:.4} | {:.3}× | {norm} | {max_rel} |", ms / base);
    }
    println!(
        "ours vs candle (all {} elements): max |diff| {max_diff:.3e}, ‖diff‖/‖candle‖ {:.3e}",
        ours.len(),
        (d2 / t2.max(f64::MIN_POSITIVE)).sqrt()
    );
    let ok = [&acc_ours, &acc_theirs].iter().all(|a| a.finite && a.norm <= NORM_ERR_LIMIT);
    if !ok {
        println!("FAILED: a normalised error above {NORM_ERR_LIMIT:e} against f64, or a non-finite element");
    }
    Ok(ok)
}
