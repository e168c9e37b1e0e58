//! Times chosen kernels forced on the same call, interleaved, each on the W it reads fastest (a
//! weight prepared by a handle of the kernel's precision: nothing repacked per call), to choose
//! Auto's table by measurement (docs/TILING.md, docs/BENCHMARKS.md).
//!
//! Run: `cargo run --release --example kernel_race -- M N K KERNEL...` with kernel names as
//! `Kernel`'s Debug form (e.g. `Sm90Pingpong128x128 Sm90Pingpong128x128Trunc`); several shapes:
//! `M,N,K` triples separated by `/`. Prints one markdown row per kernel and shape.

use std::process::ExitCode;

use gemm_epilogue::testbed::reference::SplitMix64 as Rng;
use gemm_epilogue::testbed::{self, timing};
use gemm_epilogue::{cuda_context, Dispatch, FusedGemm, Kernel, MatrixMut, MatrixRef};

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
    let kernels: Option<Vec<Kernel>> = names.iter().map(|n| Kernel::ALL.into_iter().find(|k| format!("{k:?}") == *n)).collect();
    let (Some(shapes), Some(kernels)) = (shapes, kernels) else {
        eprintln!("bad shape or kernel name");
        return ExitCode::from(2);
    };
    let ctx = match cuda_context(0) {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: no CUDA device ({e})");
            return ExitCode::SUCCESS;
        }
    };
    match race(&ctx, &shapes, &kernels) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn race(ctx: &std::sync::Arc<gemm_epilogue::cudarc::driver::CudaContext>, shapes: &[(usize, usize, usize)], kernels: &[Kernel]) -> testbed::Result<()> {
    let stream = ctx.default_stream();
    let base = FusedGemm::new(ctx)?;
    println!("| M×N×K | kernel | precision | median ms | / first |\n|---|---|---|---:|---:|");
    for &(m, n, k) in shapes {
        let mut rng = Rng::new((m * 31 + n * 17 + k) as u64);
        let x = stream.clone_htod(&(0..m * k).map(|_| rng.unit()).collect::<Vec<f32>>())?;
        let w = stream.clone_htod(&(0..n * k).map(|_| rng.sym(0.02)).collect::<Vec<f32>>())?;
        let b = stream.clone_htod(&(0..n).map(|_| rng.sym(0.02)).collect::<Vec<f32>>())?;
        let mut out = stream.alloc_zeros::<f32>(m * n)?;
        let (xr, wr) = (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k));
        // Each kernel's handle, its prepared weight and its workspace (stream-K), made once.
        let mut setups = Vec::new();
        for &kernel in kernels {
            let gemm = base.with_precision(kernel.precision()).with_dispatch(Dispatch::Force(kernel));
            let pw = gemm.prepare_weight(&stream, &wr)?;
            let len = gemm.workspace_len(&stream, &xr, &pw)?;
            let ws = stream.alloc_zeros::<f32>(len.max(1))?;
            setups.push((gemm, pw, ws));
        }
        let t = timing::interleaved(ctx, &stream, setups.len(), |_| false, 20, 20.0, |i| {
            let (gemm, pw, ws) = &mut setups[i];
            let mut o = MatrixMut::from_slice(&mut out, m, n);
            gemm.run_with_workspace(&stream, &xr, pw, Some(&b.as_view()), 0.5, &mut o, &mut ws.as_view_mut())?;
            Ok(())
        })?;
        let first = t.median_ms[0];
        for (i, kernel) in kernels.iter().enumerate() {
            let ms = t.median_ms[i];
            let ratio = match (ms, first) {
                (Some(a), Some(f)) => format!("{:.3}", a / f),
                _ => "n/a".into(),
            };
            println!("| {m}×{n}×{k} | {kernel:?} | {:?} | {} | {ratio} |", kernel.precision(), ms.map_or("n/a".into(), |v| format!("{v:.5}")));
        }
    }
    Ok(())
}
