//! The fixed cost of a call, on its own: what a call costs when the GEMM itself is nothing.
//!
//! Issue 17 saw ~10 µs per call at M = 1 (1×768×3072: 13.7 µs against cuBLAS's 4.8 µs). That is
//! host work (validation, planning, the launch calls), extra launches (a repack of W; until the
//! stream-K words carried launch numbers, a memset of the split-K counters) and the pipeline
//! fill. Each is timed here three ways:
//! - **host µs**: wall time of `CALLS` calls enqueued back to back, per call (no synchronisation
//!   inside; the queue never fills at this count), median of `BATCHES`;
//! - **back to back µs**: CUDA events around the same calls, per call: the GPU's view, which is
//!   the host rate when the host is the slower side;
//! - **alone µs**: events around one call on an idle stream (host and GPU serialised: launch
//!   latency, every launch of the call, and its kernels), median of `ALONE` calls.
//!
//! Baselines: an empty kernel (1 CTA of 32 threads, JIT-compiled PTX) and a 64-byte memset (what
//! zeroing a few split-K counters cost each split-K call before), then our calls on a trivially small shape and on the sweep's
//! worst point of issue 17, and cuBLAS's GEMM on the same shapes.

use std::sync::Arc;
use std::time::Instant;

use gemm_epilogue::cudarc::driver::sys::CUevent_flags;
use gemm_epilogue::cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use gemm_epilogue::cudarc::nvrtc::Ptx;
use gemm_epilogue::testbed::{self, timing, CublasBaseline};
use gemm_epilogue::{FusedGemm, MatrixMut, MatrixRef, Plan, PreparedWeight};

use crate::point::SCALE;

const CALLS: usize = 200;
const BATCHES: usize = 21;
const ALONE: usize = 101;
/// (M, N, K): trivially small, and issue 17's worst point.
pub const SHAPES: [(usize, usize, usize); 2] = [(1, 64, 64), (1, 768, 3072)];

const EMPTY_PTX: &str =
    ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry ge_bench_empty()\n{\n  ret;\n}\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Empty,
    Memset,
    /// `FusedGemm::plan` alone (validation and planning, no launch), prepared W.
    PlanOnly,
    /// `run`, prepared W, no workspace.
    Run,
    /// `run_with_workspace`, prepared W (what a `Linear` user who passes a workspace runs).
    RunWorkspace,
    /// `run_with_workspace`, raw W (a new user's call).
    RunRawWorkspace,
    Cublas,
}

pub struct Row {
    pub what: String,
    pub plan: Option<Plan>,
    pub host_us: f64,
    /// `None` for what launches nothing.
    pub back_to_back_us: Option<f64>,
    pub alone_us: Option<f64>,
}

struct Bench<'g> {
    gemm: &'g FusedGemm,
    blas: &'g CublasBaseline,
    stream: Arc<CudaStream>,
    empty: CudaFunction,
    counters: CudaSlice<u32>,
    shape: (usize, usize, usize),
    x: CudaSlice<f32>,
    w: CudaSlice<f32>,
    b: CudaSlice<f32>,
    out: CudaSlice<f32>,
    prepared: PreparedWeight,
    /// Workspaces for the prepared and the raw W.
    ws: [Option<CudaSlice<f32>>; 2],
}

impl Bench<'_> {
    fn call(&mut self, c: Call) -> testbed::Result<Option<Plan>> {
        let (m, n, k) = self.shape;
        let s = &self.stream;
        let (x, w, b) = (MatrixRef::from_slice(&self.x, m, k), MatrixRef::from_slice(&self.w, n, k), self.b.as_view());
        let mut out = MatrixMut::from_slice(&mut self.out, m, n);
        let plan = match c {
            Call::Empty => {
                let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
                // SAFETY: the PTX entry takes no parameters and touches no memory.
                unsafe { s.launch_builder(&self.empty).launch(cfg) }?;
                return Ok(None);
            }
            Call::Memset => return Ok(s.memset_zeros(&mut self.counters).map(|_| None)?),
            Call::Cublas => return self.blas.gemm(&x, &w, &mut out).map(|_| None),
            Call::PlanOnly => self.gemm.plan(s, &x, &self.prepared, Some(&b), &out.view()),
            Call::Run => self.gemm.run(s, &x, &self.prepared, Some(&b), SCALE, &mut out),
            Call::RunWorkspace | Call::RunRawWorkspace => {
                let raw = c == Call::RunRawWorkspace;
                match (&mut self.ws[usize::from(raw)], raw) {
                    (Some(ws), false) => self.gemm.run_with_workspace(
                        s,
                        &x,
                        &self.prepared,
                        Some(&b),
                        SCALE,
                        &mut out,
                        &mut ws.as_view_mut(),
                    ),
                    (Some(ws), true) => {
                        self.gemm.run_with_workspace(s, &x, &w, Some(&b), SCALE, &mut out, &mut ws.as_view_mut())
                    }
                    (None, false) => self.gemm.run(s, &x, &self.prepared, Some(&b), SCALE, &mut out),
                    (None, true) => self.gemm.run(s, &x, &w, Some(&b), SCALE, &mut out),
                }
            }
        };
        Ok(plan?)
    }

    fn time(&mut self, c: Call, what: String) -> testbed::Result<Row> {
        let ctx = self.gemm.context().clone();
        let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
        let plan = self.call(c)?;
        self.stream.synchronize()?;
        let launches = c != Call::PlanOnly;
        let (mut host, mut b2b, mut alone) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..BATCHES {
            let (start, end) = (event()?, event()?);
            start.record(&self.stream)?;
            let t = Instant::now();
            for _ in 0..CALLS {
                self.call(c)?;
            }
            host.push(t.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
            end.record(&self.stream)?;
            self.stream.synchronize()?;
            b2b.push(f64::from(start.elapsed_ms(&end)?) * 1e3 / CALLS as f64);
        }
        for _ in 0..if launches { ALONE } else { 0 } {
            let (start, end) = (event()?, event()?);
            start.record(&self.stream)?;
            self.call(c)?;
            end.record(&self.stream)?;
            self.stream.synchronize()?;
            alone.push(f64::from(start.elapsed_ms(&end)?) * 1e3);
        }
        let host_us = timing::median(&mut host).unwrap_or(f64::NAN);
        let (back_to_back_us, alone_us) =
            if launches { (timing::median(&mut b2b), timing::median(&mut alone)) } else { (None, None) };
        Ok(Row { what, plan, host_us, back_to_back_us, alone_us })
    }
}

/// The rows of the fixed-cost table (see the module docs).
pub fn measure(gemm: &FusedGemm, blas: &CublasBaseline, stream: &Arc<CudaStream>) -> testbed::Result<Vec<Row>> {
    let module = gemm.context().load_module(Ptx::from_src(EMPTY_PTX))?;
    let empty = module.load_function("ge_bench_empty")?;
    let counters = stream.alloc_zeros::<u32>(16)?;
    let mut rows = Vec::new();
    for (i, &(m, n, k)) in SHAPES.iter().enumerate() {
        let x = stream.clone_htod(&vec![0.5f32; m * k])?;
        let w = stream.clone_htod(&vec![0.25f32; n * k])?;
        let b = stream.clone_htod(&vec![1.0f32; n])?;
        let out = stream.alloc_zeros::<f32>(m * n)?;
        let prepared = gemm.prepare_weight(stream, &MatrixRef::from_slice(&w, n, k))?;
        let xr = MatrixRef::from_slice(&x, m, k);
        let lens = [
            gemm.workspace_len(stream, &xr, &prepared)?,
            gemm.workspace_len(stream, &xr, &MatrixRef::from_slice(&w, n, k))?,
        ];
        let mut ws = [None, None];
        for (slot, len) in ws.iter_mut().zip(lens) {
            if len > 0 {
                *slot = Some(stream.alloc_zeros::<f32>(len)?);
            }
        }
        let (empty, counters) = (empty.clone(), counters.clone());
        let mut bench =
            Bench { gemm, blas, stream: stream.clone(), empty, counters, shape: (m, n, k), x, w, b, out, prepared, ws };
        if i == 0 {
            rows.push(bench.time(Call::Empty, "empty kernel launch (1 CTA × 32 threads)".into())?);
            rows.push(bench.time(Call::Memset, "memset of 64 B (cuMemsetD8Async)".into())?);
        }
        let shape = format!("{m}×{n}×{k}");
        rows.push(
            bench
                .time(Call::PlanOnly, format!("ours `plan` only (validate + plan, no launch), {shape}, prepared W"))?,
        );
        rows.push(bench.time(Call::Run, format!("ours `run`, {shape}, prepared W, no workspace"))?);
        rows.push(bench.time(Call::RunWorkspace, format!("ours `run_with_workspace`, {shape}, prepared W"))?);
        rows.push(bench.time(Call::RunRawWorkspace, format!("ours `run_with_workspace`, {shape}, raw W (default)"))?);
        rows.push(bench.time(Call::Cublas, format!("cuBLAS TF32 GEMM alone, {shape}"))?);
    }
    Ok(rows)
}
