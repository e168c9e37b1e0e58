//! The main job: `out = (v·s) + v`, `v = x·wᵀ + b` on the reference workload (X 16384×4096,
//! W 4096×4096, b 4096, s = 0.5), timed against cuBLAS and checked against cuBLAS and an f64
//! reference; with `--epilogue FORM`, any other epilogue form `out = f(v) + β·C` instead.
//!
//! ```text
//! cargo run --release --example reference_workload -- [--m 16384] [--n 4096] [--k 4096]
//!     [--scale 0.5] [--epilogue seed] [--reps 30] [--sample-ms 0.5] [--no-bias] [--seed N]
//! ```
//!
//! Variants, timed interleaved on one stream with CUDA events (after warm-up, `reps` rounds, each
//! timing every variant once, in balanced orders; medians reported; `--sample-ms 200` makes each
//! sample 200 ms of back-to-back calls of one variant, its sustained speed on a power-capped card):
//! - ours: the fused kernel, `Dispatch::Auto` (the kernel that ran is printed);
//! - cuBLAS GEMM + elementwise: `cublasGemmEx` TF32 then our elementwise `v·s + v` pass;
//! - cuBLASLt 1 call: `cublasLtMatmul`, bias epilogue, `alpha = 1+s`, bias pre-scaled by `1+s`;
//! - cuBLAS GEMM alone: no bias, no epilogue (a different result; the speed ceiling to beat).
//!
//! `--epilogue FORM` (default `seed`: the above) picks the epilogue: `identity` (`F.linear`),
//! `relu`, `gelu` (erf), `gelu_tanh`, `silu`, `residual` (`F.linear(x, w, b) + C`, C a fresh M × N
//! matrix, β = 1), or any of them `+residual` (`gelu+residual`: `F.gelu(y) + C`). The variants
//! are then ours fused (`FusedGemm::run_gemm` with that `Epilogue`); cuBLAS's GEMM + the
//! elementwise pass applying the same epilogue (PyTorch's unfused route, bitwise its expression
//! for cuBLAS's `v`); cuBLASLt with its own epilogue where it has one (`CUBLASLT_EPILOGUE_BIAS`
//! for identity and residual, `RELU_BIAS` for relu, `GELU_BIAS` for gelu_tanh; none for gelu,
//! silu, or an activation + residual: the run says so and its row is n/a); and cuBLAS's GEMM
//! alone. `--scale` belongs to the seed form (`seed+residual` too).
//!
//! Checks: ours against cuBLAS + elementwise on every element (max |diff|, ‖diff‖/‖ref‖), and every
//! variant against the form's f64 reference (`Epilogue::reference` of the f64 `v`) on 256 sampled
//! elements. Exit code 1 when ours has a normalised error above 1e-3 against f64 or a non-finite
//! element (the inputs are finite), or when there is no usable GPU; 2 on a bad command line.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use gemm_epilogue::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use gemm_epilogue::testbed::reference::{self, HostMatrix, SplitMix64 as Rng};
use gemm_epilogue::testbed::{
    self, timing, CublasBaseline, CublasCompute, CublasLtEpilogue, CublasLtLinear, CublasLtPlan, Form,
};
use gemm_epilogue::{cuda_context, Activation, FusedGemm, Gemm, MatrixMut, MatrixRef, Plan, Precision};

const USAGE: &str = "\
usage: reference_workload [--m M] [--n N] [--k K] [--scale S] [--epilogue FORM] [--precision P] [--reps R] [--sample-ms MS] [--no-bias] [--seed SEED]

  out = (v*s) + v,  v = x·wᵀ + b   (x: M×K, w: N×K as nn.Linear, b: N; fp32, TF32 tensor cores)
  or, with --epilogue, out = f(v) + C

  --m M        rows of x and out                 (default 16384)
  --n N        rows of w = columns of out        (default 4096)
  --k K        inner dimension                   (default 4096)
  --scale S    the s in v*s + v (seed form only) (default 0.5)
  --epilogue FORM  the epilogue: seed (default: v*s + v), identity (F.linear), relu, gelu (erf),
               gelu_tanh, silu, residual (F.linear + C, C a fresh M×N matrix, beta = 1), or
               FORM+residual (e.g. gelu+residual: F.gelu(y) + C). Compared against cuBLAS GEMM +
               the same epilogue as an elementwise pass, cuBLASLt with its own epilogue where it
               has one (bias, relu, gelu_tanh; residual on identity and seed), cuBLAS GEMM alone
  --precision P  ours: tf32 (default, rounded to nearest), tf32-truncated, or tf32x3
               (3xTF32, FP32-accurate; the cuBLAS GEMMs then run in COMPUTE_32F, FP32)
  --reps R     interleaved timing rounds         (default 30)
  --sample-ms MS  least ms of back-to-back calls of one variant per timed sample
               (default 0.5; e.g. 200: each variant in its own steady power state)
  --no-bias    b = None
  --seed SEED  PRNG seed for the inputs          (default: fresh each run)
  --help       this text";

const NORM_ERR_LIMIT: f64 = 1e-3;
const SAMPLES: usize = 256;

struct Opts {
    m: usize,
    n: usize,
    k: usize,
    scale: f32,
    reps: usize,
    sample_ms: f64,
    bias: bool,
    seed: Option<u64>,
    precision: Precision,
    /// The epilogue form (`--epilogue`; its `s` is `scale`).
    form: Form,
}

enum Parsed {
    Run(Opts),
    Help,
    Bad(String),
}

fn parse(args: &[String]) -> Parsed {
    let mut o = Opts {
        m: 16384,
        n: 4096,
        k: 4096,
        scale: 0.5,
        reps: 30,
        sample_ms: 0.5,
        bias: true,
        seed: None,
        precision: Precision::Tf32,
        form: Form::seed(0.5),
    };
    let (mut form, mut scale_given) = ("seed".to_string(), false);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value =
            |name: &str| -> Result<String, String> { it.next().cloned().ok_or(format!("{name} needs a value")) };
        let result: Result<(), String> = (|| {
            match flag.as_str() {
                "--help" | "-h" => return Err("help".into()),
                "--no-bias" => o.bias = false,
                "--m" => o.m = value("--m")?.parse().map_err(|e| format!("--m: {e}"))?,
                "--n" => o.n = value("--n")?.parse().map_err(|e| format!("--n: {e}"))?,
                "--k" => o.k = value("--k")?.parse().map_err(|e| format!("--k: {e}"))?,
                "--reps" => o.reps = value("--reps")?.parse().map_err(|e| format!("--reps: {e}"))?,
                "--sample-ms" => {
                    let v: f64 = value("--sample-ms")?.parse().map_err(|e| format!("--sample-ms: {e}"))?;
                    if !(v.is_finite() && v > 0.0 && v <= 60_000.0) {
                        return Err("--sample-ms must be in (0, 60000]".into());
                    }
                    o.sample_ms = v;
                }
                "--precision" => {
                    o.precision = match value("--precision")?.as_str() {
                        "tf32" => Precision::Tf32,
                        "tf32-truncated" => Precision::Tf32Truncated,
                        "tf32x3" => Precision::Tf32x3,
                        other => return Err(format!("--precision: `{other}` is not tf32, tf32-truncated or tf32x3")),
                    }
                }
                "--seed" => o.seed = Some(value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?),
                "--epilogue" => form = value("--epilogue")?,
                "--scale" => {
                    let s: f32 = value("--scale")?.parse().map_err(|e| format!("--scale: {e}"))?;
                    if !s.is_finite() {
                        return Err("--scale must be finite".into());
                    }
                    o.scale = s;
                    scale_given = true;
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
            Ok(())
        })();
        match result {
            Ok(()) => {}
            Err(e) if e == "help" => return Parsed::Help,
            Err(e) => return Parsed::Bad(e),
        }
    }
    if o.m == 0 || o.n == 0 || o.k == 0 {
        return Parsed::Bad("--m, --n and --k must be at least 1".into());
    }
    if o.reps == 0 {
        return Parsed::Bad("--reps must be at least 1".into());
    }
    o.form = match Form::parse(&form, o.scale) {
        Some(f) => f,
        None => return Parsed::Bad(format!("--epilogue: `{form}` is not one of {}", Form::NAMES)),
    };
    if scale_given && !matches!(o.form.activation, Activation::ScaleAdd(_)) {
        return Parsed::Bad(format!("--scale is the seed form's s; --epilogue {} has none", o.form.name()));
    }
    Parsed::Run(o)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Ours,
    CublasElementwise,
    CublasLt,
    CublasGemm,
}
const VARIANTS: [Variant; 4] = [Variant::Ours, Variant::CublasElementwise, Variant::CublasLt, Variant::CublasGemm];
impl Variant {
    /// Its row's label; `lt` is cuBLASLt's epilogue for a form other than the seed's (`None`: it
    /// has none for the form).
    fn label(self, form: Form, lt: Option<&str>) -> String {
        match self {
            Variant::Ours => "ours (fused, 1 kernel)".into(),
            Variant::CublasElementwise => "cuBLAS GEMM + elementwise".into(),
            Variant::CublasLt if form.is_seed() => "cuBLASLt bias+alpha (1 call)".into(),
            Variant::CublasLt => match lt {
                Some(name) => format!("cuBLASLt {} (1 call)", name.trim_start_matches("CUBLASLT_EPILOGUE_")),
                None => "cuBLASLt (no epilogue for this form)".into(),
            },
            Variant::CublasGemm => "cuBLAS GEMM alone (no b, no epilogue)".into(),
        }
    }
    fn index(self) -> usize {
        VARIANTS.iter().position(|&v| v == self).unwrap()
    }
}

struct Job {
    o: Opts,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    gemm: FusedGemm,
    blas: CublasBaseline,
    lt: CublasLtLinear,
    lt_plan: Option<CublasLtPlan>,
    x: CudaSlice<f32>,
    w: CudaSlice<f32>,
    b: Option<CudaSlice<f32>>,
    /// The residual C (M × N) of a `+residual` form.
    c: Option<CudaSlice<f32>>,
    /// One output per variant, so they can be compared afterwards.
    outs: Vec<CudaSlice<f32>>,
    /// Scratch for repacking rows that are not 16-byte aligned (K % 4 != 0), allocated once.
    workspace: Option<CudaSlice<f32>>,
}

impl Job {
    fn launch(&mut self, v: Variant) -> testbed::Result<Option<Plan>> {
        let (m, n, k) = (self.o.m, self.o.n, self.o.k);
        let x = MatrixRef::from_slice(&self.x, m, k);
        let w = MatrixRef::from_slice(&self.w, n, k);
        let b = self.b.as_ref().map(|b| b.as_view());
        let c = self.c.as_ref().map(|c| MatrixRef::from_slice(c, m, n));
        let epilogue = self.o.form.epilogue(c.as_ref());
        let mut out = MatrixMut::from_slice(&mut self.outs[v.index()], m, n);
        // Like with like: the FP32-accurate mode against cuBLAS's FP32 GEMM.
        let compute = if self.o.precision == Precision::Tf32x3 { CublasCompute::Fp32 } else { CublasCompute::Tf32 };
        match v {
            Variant::Ours => {
                let mut ws = self.workspace.as_mut().map(|ws| ws.as_view_mut());
                let call = Gemm { x: &x, w: &w, bias: b.as_ref(), epilogue, out: &mut out, workspace: ws.as_mut() };
                self.gemm.run_gemm(&self.stream, call).map_err(Into::into)
            }
            Variant::CublasElementwise => {
                self.blas.linear_epilogue_as(compute, &x, &w, b.as_ref(), epilogue, &mut out).map(|_| None)
            }
            Variant::CublasLt => match &self.lt_plan {
                Some(plan) => self.lt.run_with(plan, &x, &w, c.as_ref(), &mut out).map(|_| None),
                None => Ok(None),
            },
            Variant::CublasGemm => self.blas.gemm_as(compute, &x, &w, &mut out).map(|_| None),
        }
    }

    /// Median ms per call of each variant (indexed like `VARIANTS`), interleaved in balanced
    /// orders (`testbed::timing::round_order`) after ~0.3 s of warm-up, and the calls per sample.
    fn time(&mut self) -> testbed::Result<([Option<f64>; 4], u64)> {
        let (ctx, stream, reps, sample_ms) = (self.ctx.clone(), self.stream.clone(), self.o.reps, self.o.sample_ms);
        let no_lt = self.lt_plan.is_none();
        let skip = |i: usize| VARIANTS[i] == Variant::CublasLt && no_lt;
        let t = timing::interleaved_samples(&ctx, &stream, VARIANTS.len(), skip, reps, 300.0, sample_ms, |i| {
            self.launch(VARIANTS[i]).map(|_| ())
        })?;
        let mut med = [None; 4];
        med.copy_from_slice(&t.median_ms);
        Ok((med, t.batch))
    }
}

/// Error of one output against the f64 reference on the sampled elements.
struct SpotError {
    /// sqrt(Σ (out − ref)²) / sqrt(Σ ref²).
    normalised: f64,
    /// max |out − ref| / magnitude, magnitude = (1+|s|)(Σ|x||w| + |b|) (other forms:
    /// `reference::epilogue_element`'s).
    max_rel_to_magnitude: f64,
    max_abs: f64,
    non_finite: usize,
}

fn spot_check(out: &[f32], n: usize, refs: &[((usize, usize), reference::RefElement)]) -> SpotError {
    let (mut num, mut den, mut worst, mut max_abs, mut non_finite) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0usize);
    for &((r, c), re) in refs {
        let got = out[r * n + c] as f64;
        if !got.is_finite() {
            non_finite += 1;
            continue;
        }
        let err = (got - re.value).abs();
        num += err * err;
        den += re.value * re.value;
        max_abs = max_abs.max(err);
        worst = worst.max(if re.magnitude > 0.0 { err / re.magnitude } else { err });
    }
    SpotError {
        normalised: num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE),
        max_rel_to_magnitude: worst,
        max_abs,
        non_finite,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Parsed::Run(o) => o,
        Parsed::Help => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Parsed::Bad(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let ctx = match cuda_context(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("no CUDA driver/device: {e}; this example needs an NVIDIA GPU (sm_80+)");
            return ExitCode::from(1);
        }
    };
    match run(o, ctx) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(o: Opts, ctx: Arc<CudaContext>) -> testbed::Result<ExitCode> {
    let gemm = match FusedGemm::new(&ctx) {
        Ok(g) => g.with_precision(o.precision),
        Err(e) => {
            eprintln!("the fused kernels cannot run here: {e}; this example needs an NVIDIA GPU (sm_80+)");
            return Ok(ExitCode::from(1));
        }
    };
    let dev = gemm.device();
    println!(
        "device: {} (sm_{}{}, {} SMs)",
        ctx.name().unwrap_or_else(|_| "unknown".into()),
        dev.compute_capability.0,
        dev.compute_capability.1,
        dev.sm_count
    );
    let (m, n, k, s, form) = (o.m, o.n, o.k, o.scale, o.form);
    println!(
        "precision: ours {:?}; cuBLAS {}",
        o.precision,
        if o.precision == Precision::Tf32x3 {
            "COMPUTE_32F (FP32) for the GEMM rows, cuBLASLt TF32"
        } else {
            "TF32 (COMPUTE_32F_FAST_TF32)"
        }
    );
    let flop = 2.0 * m as f64 * n as f64 * k as f64;
    let b_len = if o.bias { n.to_string() } else { "none".into() };
    if form.is_seed() {
        println!("problem: x {m}×{k}, w {n}×{k}, b {b_len}, s = {s}: {:.3} TFLOP", flop / 1e12);
    } else {
        let c = if form.residual { format!(", C {m}×{n}") } else { String::new() };
        println!(
            "problem: x {m}×{k}, w {n}×{k}, b {b_len}{c}, epilogue {}: out = {} with y = F.linear(x, w, b): {:.3} TFLOP",
            form.name(),
            form.pytorch(),
            flop / 1e12
        );
    }

    let seed =
        o.seed.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0x5eed, |d| d.as_nanos() as u64));
    println!("seed: {seed} (x ~ U(0,1), w, b ~ U(−1/√K, 1/√K))");
    let mut rng = Rng::new(seed);
    let a = 1.0 / (k as f32).sqrt();
    let hx: Vec<f32> = (0..m * k).map(|_| rng.unit()).collect();
    let hw: Vec<f32> = (0..n * k).map(|_| rng.sym(a)).collect();
    let hb: Option<Vec<f32>> = o.bias.then(|| (0..n).map(|_| rng.sym(a)).collect());
    // The residual: fresh data of v's order of magnitude.
    let hc: Option<Vec<f32>> = form.residual.then(|| (0..m * n).map(|_| rng.sym(1.0)).collect());

    let stream = ctx.default_stream();
    let x = stream.clone_htod(&hx)?;
    let w = stream.clone_htod(&hw)?;
    let b = hb.as_ref().map(|hb| stream.clone_htod(hb)).transpose()?;
    let c = hc.as_ref().map(|hc| stream.clone_htod(hc)).transpose()?;
    let outs = (0..4).map(|_| stream.alloc_zeros::<f32>(m * n)).collect::<Result<Vec<_>, _>>()?;
    let blas = CublasBaseline::new(&gemm, stream.clone())?;
    let lt = CublasLtLinear::new(&gemm, stream.clone())?;
    let workspace_len =
        gemm.workspace_len(&stream, &MatrixRef::from_slice(&x, m, k), &MatrixRef::from_slice(&w, n, k))?;
    let workspace = if workspace_len > 0 { Some(stream.alloc_zeros::<f32>(workspace_len)?) } else { None };
    let mut job =
        Job { o, ctx: ctx.clone(), stream: stream.clone(), gemm, blas, lt, lt_plan: None, x, w, b, c, outs, workspace };
    {
        let (xr, wr) = (MatrixRef::from_slice(&job.x, m, k), MatrixRef::from_slice(&job.w, n, k));
        let bv = job.b.as_ref().map(|b| b.as_view());
        let cr = job.c.as_ref().map(|c| MatrixRef::from_slice(c, m, n));
        let probe = MatrixMut::from_slice(&mut job.outs[Variant::CublasLt.index()], m, n);
        match job.lt.prepare_epilogue(&xr, &wr, bv.as_ref(), form.epilogue(cr.as_ref()), &probe) {
            Ok(p) => job.lt_plan = Some(p),
            // The form has no cuBLASLt epilogue: the line below says why.
            Err(testbed::Error::Unsupported { .. }) => {}
            Err(e) => println!("cuBLASLt variant unavailable: {e}"),
        }
    }
    // cuBLASLt's epilogue for the form, or why it has none.
    let lt_epilogue = CublasLtEpilogue::of(&form.epilogue(Some(()))).map(|e| e.name(job.o.bias));
    if !form.is_seed() {
        let lt = match lt_epilogue {
            Ok(name) if form.residual => format!("{name} + beta·C through its C"),
            Ok(name) => name.to_string(),
            Err(why) => format!("none, its row is n/a ({why})"),
        };
        println!(
            "epilogue: ours fused; cuBLAS + elementwise: the same epilogue in a second pass over out; cuBLASLt: {lt}"
        );
    }
    let lt_name = lt_epilogue.ok();

    let plan = job.launch(Variant::Ours)?;
    match plan {
        Some(p) => println!(
            "ours ran: {} (grid {}, block {}, smem {} B{}{}{}; workspace {} MiB)",
            p.kernel,
            p.grid,
            p.block,
            p.smem_bytes,
            match (p.repack_x, p.repack_w) {
                (false, false) => String::new(),
                (rx, rw) => format!("; repacked {}{} first", if rx { "x " } else { "" }, if rw { "w" } else { "" }),
            },
            if p.stream_k_tiles > 0 {
                format!("; {} tiles shared along K (stream-K)", p.stream_k_tiles)
            } else {
                String::new()
            },
            if p.tma_store { "; TMA-store epilogue" } else { "" },
            (workspace_len * 4) >> 20,
        ),
        None => println!("ours ran: nothing (empty problem)"),
    }

    let (medians, batch) = job.time()?;
    println!("timing: {} interleaved rounds, {batch} call(s) per sample, medians", job.o.reps);

    // Results: every variant ran last in the timing loop on its own buffer.
    stream.synchronize()?;
    let host: Vec<Option<Vec<f32>>> = VARIANTS
        .iter()
        .map(|&v| {
            if v != Variant::CublasLt || job.lt_plan.is_some() {
                stream.clone_dtoh(&job.outs[v.index()]).map(Some)
            } else {
                Ok(None)
            }
        })
        .collect::<Result<_, _>>()?;
    let ours = host[0].as_ref().expect("ours always runs");
    let base = host[1].as_ref().expect("the cuBLAS baseline always runs");

    // Ours vs cuBLAS + elementwise, every element.
    let (mut max_diff, mut num, mut den, mut ours_non_finite) = (0.0f64, 0.0f64, 0.0f64, 0usize);
    for (&a, &b) in ours.iter().zip(base.iter()) {
        if !a.is_finite() {
            ours_non_finite += 1;
            continue;
        }
        let d = (a as f64 - b as f64).abs();
        max_diff = max_diff.max(d);
        num += d * d;
        den += (b as f64) * (b as f64);
    }
    let norm_diff = num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE);

    // f64 spot check on sampled elements (corners included).
    let (xm, wm) = (HostMatrix::new(&hx, m, k), HostMatrix::new(&hw, n, k));
    let mut points: Vec<(usize, usize)> = vec![(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
    while points.len() < SAMPLES.min(m * n) {
        points.push((rng.below(m), rng.below(n)));
    }
    // The form's f64 reference: Epilogue::reference(v, C) of the f64 v (for the seed form,
    // reference::element's v·s + v).
    let reference = form.epilogue(Some(()));
    let refs: Vec<_> = points
        .iter()
        .map(|&(r, c)| {
            let c_value = hc.as_ref().map_or(0.0, |hc| hc[r * n + c] as f64);
            ((r, c), reference::epilogue_element(xm, wm, hb.as_deref(), &reference, c_value, r, c))
        })
        .collect();
    let errors: Vec<Option<SpotError>> = host
        .iter()
        .enumerate()
        .map(|(i, h)| if i == 3 { None } else { h.as_ref().map(|h| spot_check(h, n, &refs)) })
        .collect();

    let t_ours = medians[0].expect("ours is always timed");
    println!();
    println!("| variant | median ms | TFLOP/s | speed-up of ours over it | error vs f64 ({} samples): ‖e‖/‖ref‖, max |e|/magnitude |", refs.len());
    println!("|---|---:|---:|---:|---|");
    for v in VARIANTS {
        let i = v.index();
        let Some(ms) = medians[i] else {
            println!("| {} | n/a | n/a | n/a | not available |", v.label(form, lt_name));
            continue;
        };
        let err = match &errors[i] {
            Some(e) => format!(
                "{:.2e}, {:.2e}{}",
                e.normalised,
                e.max_rel_to_magnitude,
                if e.non_finite > 0 { format!(" ({} non-finite)", e.non_finite) } else { String::new() }
            ),
            None if v == Variant::CublasGemm => "n/a (computes x·wᵀ only)".into(),
            None => "n/a".into(),
        };
        let label = v.label(form, lt_name);
        println!("| {label} | {:.4} | {:.1} | {:.3}× | {} |", ms, flop / (ms * 1e-3) / 1e12, ms / t_ours, err);
    }
    println!();
    println!(
        "ours vs cuBLAS + elementwise, all {} elements: max |diff| = {max_diff:.3e}, ‖diff‖/‖cuBLAS‖ = {norm_diff:.3e}",
        m * n
    );
    let e = errors[0].as_ref().expect("ours is checked");
    println!(
        "ours vs f64: ‖e‖/‖ref‖ = {:.3e}, max |e| = {:.3e}, max |e|/magnitude = {:.3e}",
        e.normalised, e.max_abs, e.max_rel_to_magnitude
    );

    let mut failed = false;
    if ours_non_finite > 0 {
        eprintln!("FAIL: {ours_non_finite} non-finite elements in our output (inputs are finite)");
        failed = true;
    }
    if e.normalised.is_nan() || e.normalised > NORM_ERR_LIMIT {
        eprintln!("FAIL: normalised error vs f64 {:.3e} exceeds {NORM_ERR_LIMIT:e}", e.normalised);
        failed = true;
    }
    if failed {
        return Ok(ExitCode::from(1));
    }
    println!("PASS (normalised error vs f64 ≤ {NORM_ERR_LIMIT:e}, all elements finite)");
    Ok(ExitCode::SUCCESS)
}
