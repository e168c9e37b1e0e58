//! Times chosen kernels forced on the same call, interleaved, each on the W it reads fastest (a
//! weight prepared by a handle of the kernel's precision: nothing repacked per call), to choose
//! Auto's table by measurement (docs/TILING.md, docs/BENCHMARKS.md).
//!
//! Run: `cargo run --release --example kernel_race -- M N K KERNEL...` with kernel names as
//! `Kernel`'s Debug form (e.g. `Sm90Pingpong128x128RmemA Sm90Pingpong128x128SmemA`); several shapes:
//! `M,N,K` triples separated by `/`. Prints one markdown row per kernel and shape, with the
//! kernel's ‖e‖/‖ref‖ against the f64 reference on sampled elements (one more call, output poisoned).
//! `GEMM_EPILOGUE_SM_LIMITS=a,b,…` races each kernel under each SM limit as well
//! (`FusedGemm::with_sm_limit`; 0 = none): a split-K or stream-K plan then spreads over fewer CTAs.
//! `GEMM_EPILOGUE_SAMPLE_MS=t` makes each sample at least t ms of back-to-back calls (default 0.5;
//! ~100 runs each kernel at the clock its own power draw leaves: docs/BENCHMARKS.md, "Sustained
//! load"), `GEMM_EPILOGUE_RACE_ROUNDS=r` sets the rounds (default 20).
//! `GEMM_EPILOGUE_RACE_WORKSPACE=with|without|both` (default `with`): each kernel runs with the
//! workspace it asks for, through `run` without one (no stream-K or split-K: the plan then
//! shares no tile), or both ways, so that a stream-K tail can be raced against none. A call that
//! cannot run without a workspace (X to repack) stops the race with its error.
//! `GEMM_EPILOGUE_RACE_SIGNED_X=1` draws X from U(−1, 1) instead of U(0, 1) (PyTorch's `randn`
//! data is signed too). `GEMM_EPILOGUE_RACE_ROUND_ON_LOAD=1` runs the `SmemA` kernels under a
//! `Tf32` handle (TF32 tensor maps: rounded on load, as Auto runs them) instead of truncating.
//! `GEMM_EPILOGUE_RACE_FORMS=seed,identity,relu,gelu,gelu_tanh,silu,residual` (default `seed`):
//! each kernel runs each epilogue form (`residual`: `v + C`, C a fresh M × N matrix), so that a
//! form's cost is a ratio to the seed form's on the same kernel and shape, interleaved; the error
//! column is then against that form's f64 reference.

use std::num::NonZeroU32;
use std::process::ExitCode;

use gemm_epilogue::cudarc::driver::CudaSlice;
use gemm_epilogue::testbed::reference::{self, HostMatrix, SplitMix64 as Rng};
use gemm_epilogue::testbed::{self, timing};
use gemm_epilogue::{
    cuda_context, Activation, Dispatch, Epilogue, FusedGemm, Gemm, Kernel, MatrixMut, MatrixRef, PreparedWeight,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((shapes, names)) = args.split_first() else {
        eprintln!("usage: kernel_race M,N,K[/M,N,K...] KERNEL...");
        return ExitCode::from(2);
    };
    let shapes: Option<Vec<(usize, usize, usize)>> = shapes
        .split('/')
        .map(|s| match s.split(',').map(|v| v.parse::<usize>().ok()).collect::<Option<Vec<_>>>()?.as_slice() {
            [m, n, k] => Some((*m, *n, *k)),
            _ => None,
        })
        .collect();
    let kernels: Option<Vec<Kernel>> =
        names.iter().map(|n| Kernel::ALL.into_iter().find(|k| format!("{k:?}") == *n)).collect();
    let limits: Option<Vec<u32>> = match std::env::var("GEMM_EPILOGUE_SM_LIMITS") {
        Ok(v) => v.split(',').map(|l| l.trim().parse().ok()).collect(),
        Err(_) => Some(vec![0]),
    };
    let sample_ms = match std::env::var("GEMM_EPILOGUE_SAMPLE_MS") {
        Ok(v) => v.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0),
        Err(_) => Some(0.5),
    };
    let rounds = match std::env::var("GEMM_EPILOGUE_RACE_ROUNDS") {
        Ok(v) => v.trim().parse::<usize>().ok().filter(|&r| r > 0),
        Err(_) => Some(20),
    };
    let workspaces: Option<&[bool]> = match std::env::var("GEMM_EPILOGUE_RACE_WORKSPACE").as_deref() {
        Err(_) | Ok("with") => Some(&[true]),
        Ok("without") => Some(&[false]),
        Ok("both") => Some(&[true, false]),
        Ok(_) => None,
    };
    let forms: Option<Vec<Form>> = match std::env::var("GEMM_EPILOGUE_RACE_FORMS") {
        Ok(v) => v.split(',').map(|f| Form::parse(f.trim())).collect(),
        Err(_) => Some(vec![Form::SEED]),
    };
    let (Some(shapes), Some(kernels), Some(limits), Some(sample_ms), Some(rounds), Some(workspaces), Some(forms)) =
        (shapes, kernels, limits, sample_ms, rounds, workspaces, forms)
    else {
        eprintln!("bad shape, kernel name, GEMM_EPILOGUE_SM_LIMITS, GEMM_EPILOGUE_SAMPLE_MS, GEMM_EPILOGUE_RACE_ROUNDS, GEMM_EPILOGUE_RACE_WORKSPACE or GEMM_EPILOGUE_RACE_FORMS");
        return ExitCode::from(2);
    };
    let timing = Samples { ms: sample_ms, rounds };
    let kernels: Vec<Racer> = kernels
        .iter()
        .flat_map(|&kernel| {
            let forms = &forms;
            limits.iter().flat_map(move |&limit| {
                workspaces
                    .iter()
                    .flat_map(move |&workspace| forms.iter().map(move |&form| Racer { kernel, limit, workspace, form }))
            })
        })
        .collect();
    let ctx = match cuda_context(0) {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: no CUDA device ({e})");
            return ExitCode::SUCCESS;
        }
    };
    match race(&ctx, &shapes, &kernels, timing) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Rows and columns of `out` compared with the f64 reference per kernel (as the sweep bench does).
const CHECK_ROWS: usize = 16;
const CHECK_COLS: usize = 32;

/// One row of the race: a kernel forced, under an SM limit (0: none), with or without a
/// workspace, with one epilogue form.
#[derive(Clone, Copy)]
struct Racer {
    kernel: Kernel,
    limit: u32,
    workspace: bool,
    form: Form,
}

/// An epilogue form of the race: `f`, and whether `+ C` follows.
#[derive(Clone, Copy, Debug)]
struct Form {
    activation: Activation,
    residual: bool,
}

impl Form {
    const SEED: Form = Form { activation: Activation::ScaleAdd(0.5), residual: false };

    fn parse(name: &str) -> Option<Form> {
        let activation = match name {
            "seed" => Activation::ScaleAdd(0.5),
            "identity" | "residual" => Activation::Identity,
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "gelu_tanh" => Activation::GeluTanh,
            "silu" => Activation::Silu,
            _ => return None,
        };
        Some(Form { activation, residual: name == "residual" })
    }

    fn name(self) -> String {
        match (self.activation, self.residual) {
            (Activation::ScaleAdd(s), _) => format!("v·{s} + v"),
            (a, false) => format!("{a:?}"),
            (a, true) => format!("{a:?} + C"),
        }
    }
}

/// How long each sample lasts and how many rounds of them.
#[derive(Clone, Copy)]
struct Samples {
    ms: f64,
    rounds: usize,
}

fn race(
    ctx: &std::sync::Arc<gemm_epilogue::cudarc::driver::CudaContext>,
    shapes: &[(usize, usize, usize)],
    kernels: &[Racer],
    timing: Samples,
) -> testbed::Result<()> {
    let stream = ctx.default_stream();
    let base = FusedGemm::new(ctx)?;
    println!(
        "Interleaved, {} rounds of one sample per kernel, each sample at least {} ms of back-to-back calls; medians.\n",
        timing.rounds, timing.ms
    );
    println!("| M×N×K | kernel | epilogue | SM limit | precision | grid, stream-K | median ms | / first | ‖e‖/‖ref‖ vs f64 |\n|---|---|---|---:|---|---|---:|---:|---:|");
    let all = kernels;
    for &(m, n, k) in shapes {
        let mut rng = Rng::new((m * 31 + n * 17 + k) as u64);
        // Kept on the host too: the error check below reads them.
        // U(0, 1), or U(−1, 1) with GEMM_EPILOGUE_RACE_SIGNED_X set: random signs toggle more
        // bits in the tensor cores, draw more power, and so lower the clocks the power cap leaves.
        let signed = std::env::var_os("GEMM_EPILOGUE_RACE_SIGNED_X").is_some();
        let round_on_load = std::env::var_os("GEMM_EPILOGUE_RACE_ROUND_ON_LOAD").is_some();
        let hx: Vec<f32> = (0..m * k).map(|_| if signed { rng.sym(1.0) } else { rng.unit() }).collect();
        let hw: Vec<f32> = (0..n * k).map(|_| rng.sym(0.02)).collect();
        let hb: Vec<f32> = (0..n).map(|_| rng.sym(0.02)).collect();
        let (x, w, b) = (stream.clone_htod(&hx)?, stream.clone_htod(&hw)?, stream.clone_htod(&hb)?);
        let mut out = stream.alloc_zeros::<f32>(m * n)?;
        let (xr, wr) = (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k));
        // A kernel that holds all of X in one tile sits out the shapes with more rows (its row
        // says so), so that one race can span M.
        let kernels: Vec<Racer> =
            kernels.iter().copied().filter(|r| r.kernel.max_m().is_none_or(|rows| m <= rows as usize)).collect();
        // Each row's handle, its prepared weight and its workspace (stream-K; None: run without), made once.
        let mut setups = Vec::new();
        for r in &kernels {
            // The kernel's own precision, or Tf32 with GEMM_EPILOGUE_RACE_ROUND_ON_LOAD set: the
            // `SmemA` kernels then read through TF32 tensor maps (rounded on load), as Auto runs them.
            let precision = match (round_on_load, r.kernel.can_round_on_load()) {
                (true, true) => gemm_epilogue::Precision::Tf32,
                _ => r.kernel.precision(),
            };
            let gemm = base
                .with_precision(precision)
                .with_dispatch(Dispatch::Force(r.kernel))
                .with_sm_limit(NonZeroU32::new(r.limit));
            let pw = gemm.prepare_weight(&stream, &wr)?;
            let ws = if r.workspace {
                Some(stream.alloc_zeros::<f32>(gemm.workspace_len(&stream, &xr, &pw)?.max(1))?)
            } else {
                None
            };
            setups.push((gemm, pw, ws, None));
        }
        // C for the residual form, fresh data as the operands.
        let hc: Vec<f32> = (0..m * n).map(|_| rng.sym(1.0)).collect();
        let c = stream.clone_htod(&hc)?;
        let cr = MatrixRef::from_slice(&c, m, n);
        // One call of a row: its form, with its workspace or without one.
        let call = |gemm: &FusedGemm,
                    pw: &PreparedWeight,
                    ws: &mut Option<CudaSlice<f32>>,
                    form: Form,
                    o: &mut MatrixMut<'_>| {
            let epilogue = match form.residual {
                true => Epilogue::activation(form.activation).with_residual(&cr, 1.0),
                false => Epilogue::activation(form.activation),
            };
            let mut ws_view = ws.as_mut().map(|w| w.as_view_mut());
            let bias = b.as_view();
            gemm.run_gemm(
                &stream,
                Gemm { x: &xr, w: pw, bias: Some(&bias), epilogue, out: o, workspace: ws_view.as_mut() },
            )
        };
        let t = timing::interleaved_samples(
            ctx,
            &stream,
            setups.len(),
            |_| false,
            timing.rounds,
            20.0,
            timing.ms,
            |i| {
                let (gemm, pw, ws, plan) = &mut setups[i];
                *plan = call(gemm, pw, ws, kernels[i].form, &mut MatrixMut::from_slice(&mut out, m, n))?;
                Ok(())
            },
        )?;
        // Each kernel's error against the f64 reference, on a fresh call into a poisoned (NaN) output.
        let (xm, wm) = (HostMatrix::new(&hx, m, k), HostMatrix::new(&hw, n, k));
        let rows: Vec<usize> = (0..CHECK_ROWS.min(m)).map(|_| rng.below(m)).collect();
        let cols: Vec<usize> = (0..CHECK_COLS.min(n)).map(|_| rng.below(n)).collect();
        let v: Vec<f64> = rows
            .iter()
            .flat_map(|&r| cols.iter().map(move |&c| (r, c)))
            .map(|(r, c)| reference::element(xm, wm, Some(&hb), 0.0, r, c).value)
            .collect();
        let (poison, mut errors) = (vec![f32::NAN; m * n], Vec::new());
        for (i, (gemm, pw, ws, _)) in setups.iter_mut().enumerate() {
            let form = kernels[i].form;
            let epilogue = Epilogue::<()>::activation(form.activation);
            let epilogue = if form.residual { epilogue.with_residual((), 1.0) } else { epilogue };
            let want = rows
                .iter()
                .flat_map(|&r| cols.iter().map(move |&c| (r, c)))
                .zip(&v)
                .map(|((r, c), &v)| epilogue.reference(v, hc[r * n + c] as f64));
            stream.memcpy_htod(&poison, &mut out)?;
            call(gemm, pw, ws, form, &mut MatrixMut::from_slice(&mut out, m, n))?;
            let got: Vec<Vec<f32>> =
                rows.iter().map(|&r| stream.clone_dtoh(&out.slice(r * n..(r + 1) * n))).collect::<Result<_, _>>()?;
            errors.push(reference::relative_error(
                got.iter().flat_map(|row| cols.iter().map(move |&c| row[c])).zip(want),
            ));
        }
        let first = t.median_ms[0];
        for (i, &Racer { kernel, limit, workspace, form }) in kernels.iter().enumerate() {
            let ms = t.median_ms[i];
            let ratio = match (ms, first) {
                (Some(a), Some(f)) => format!("{:.3}", a / f),
                _ => "n/a".into(),
            };
            let limit = if limit == 0 { "–".to_string() } else { limit.to_string() };
            let without = if workspace { "" } else { ", no workspace" };
            let plan = setups[i].3.map_or("–".into(), |p| {
                format!("{}, {} tiles over {} CTAs{without}", p.grid, p.stream_k_tiles, p.stream_k_ctas)
            });
            println!(
                "| {m}×{n}×{k} | {kernel:?} | {} | {limit} | {:?} | {plan} | {} | {ratio} | {:.2e} |",
                form.name(),
                setups[i].0.precision(),
                ms.map_or("n/a".into(), |v| format!("{v:.5}")),
                errors[i]
            );
        }
        // One row per kernel sitting out, not one per SM limit and workspace (racers come grouped by kernel).
        let mut sitting_out: Vec<Kernel> = all
            .iter()
            .map(|r| r.kernel)
            .filter(|kernel| kernel.max_m().is_some_and(|rows| m > rows as usize))
            .collect();
        sitting_out.dedup();
        for kernel in sitting_out {
            println!(
                "| {m}×{n}×{k} | {kernel:?} | – | – | {:?} | not run: M > its {} rows | – | – | – |",
                kernel.precision(),
                kernel.max_m().unwrap_or(0)
            );
        }
    }
    Ok(())
}
