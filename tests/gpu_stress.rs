//! Stress (issue 15): 4 host threads, each with 2 streams of its own, each thread making 500 calls
//! of mixed shapes — split-K and shared tails through a workspace, repacks (K % 4 ≠ 0, a
//! misaligned view), the 2-CTA cluster kernels on sm_90, Auto with each precision — on one
//! `FusedGemm` handle shared by every thread, into separate outputs and workspaces; every output
//! compared bit for bit with a solo run of the same call (made first, alone, on the test's
//! stream). Prints the number of calls and mismatches; any mismatch fails.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{Case, DeviceInputs, Gpu, Inputs};
use gemm_epilogue::cudarc::driver::CudaStream;
use gemm_epilogue::{Kernel, MatrixMut, Precision};

const THREADS: usize = 4;
const STREAMS_PER_THREAD: usize = 2;
const CALLS_PER_THREAD: usize = 500;
/// Calls in flight per thread before their outputs are downloaded and compared.
const BATCH: usize = 50;

/// The mixed calls: each must run here (a forced kernel the device refuses is replaced by Auto).
fn templates(g: &Gpu) -> Vec<Case> {
    let mut v = vec![
        Case::new(1, 4096, 2048).workspace(true),                     // split-K (Auto)
        Case::new(129, 1000, 1027).workspace(true).scale(-2.0),       // repack both, K % 4 ≠ 0
        Case::new(300, 520, 512).offset(1, 0, 0, 0).workspace(true),  // repack X (misaligned view)
        Case::new(257, 300, 256).pad(4, 8, 3).bias(false).scale(3.0), // no workspace, strided
        Case::new(64, 8192, 680).workspace(true).precision(Precision::Tf32Truncated), // split-K, truncating
        Case::new(1, 4096, 4096).workspace(true).prepared_w(true),    // split-K on a prepared W
    ];
    let forced = [
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, Case::new(1, 4096, 4096).workspace(true)),
        (Kernel::Sm90Pingpong128x128Cluster2RmemA, Case::new(300, 520, 512).workspace(true).prepared_w(true)),
        (Kernel::Sm90Pingpong128x128Cluster2SmemA, Case::new(4097, 1025, 68)),
        (Kernel::Sm80Mma64x64Scalar, Case::new(300, 520, 777).workspace(true)),
        (Kernel::Sm80Mma128x128Vec4Trunc, Case::new(129, 1000, 2048).workspace(true)),
    ];
    for (kernel, case) in forced {
        match common::refusal(g, &case, kernel) {
            None => v.push(case.force(kernel)),
            Some(why) => println!("note: {kernel:?} replaced by Auto: {why}"),
        }
    }
    v
}

/// One call on `stream` into a fresh poisoned output (and workspace): returns the output buffer.
fn call(
    g: &Gpu,
    stream: &Arc<CudaStream>,
    case: &Case,
    d: &DeviceInputs,
) -> gemm_epilogue::cudarc::driver::CudaSlice<f32> {
    let gemm = case.gemm(&g.gemm);
    let (x, b) = (d.x_view(case), d.b_view(case));
    let w = common::CaseWeight::new(&gemm, stream, case, d.w_view(case));
    let mut out = stream.clone_htod(&common::poisoned(common::out_len(case))).expect("upload poison");
    {
        let len = common::extent(case.m, case.n, case.ldo());
        let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + len), case.m, case.n, case.ldo());
        if case.workspace {
            let wl = w.workspace_len(&gemm, stream, &x).expect("workspace_len");
            let mut ws = stream.clone_htod(&common::poisoned(wl.max(1))).expect("upload workspace");
            w.run_with_workspace(&gemm, stream, &x, b.as_ref(), case.scale, &mut o, &mut ws.as_view_mut())
        } else {
            w.run(&gemm, stream, &x, b.as_ref(), case.scale, &mut o)
        }
        .unwrap_or_else(|e| panic!("{case:?}: {e}"));
    }
    out
}

#[test]
fn stress_threads_and_streams_bitwise_equal_to_solo_runs() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("stress_threads_and_streams_bitwise_equal_to_solo_runs");
    let cases = templates(&g);
    let inputs: Vec<Inputs> = cases.iter().map(|c| Inputs::generate(c, &mut rng)).collect();
    // Solo runs: one at a time on the test's stream.
    let solo: Vec<Vec<u32>> = cases
        .iter()
        .zip(&inputs)
        .map(|(c, i)| {
            let d = DeviceInputs::upload(&g, i);
            let out = call(&g, &g.stream, c, &d);
            let host = g.stream.clone_dtoh(&out).expect("download");
            let plan = common::execute_on(&g, c, &d, false).plan;
            println!("template {c:?}: {plan:?}");
            host.iter().map(|v| v.to_bits()).collect()
        })
        .collect();
    let (calls, mismatches) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (g, cases, inputs, solo, calls, mismatches) = (&g, &cases, &inputs, &solo, &calls, &mismatches);
            s.spawn(move || {
                let streams: Vec<Arc<CudaStream>> =
                    (0..STREAMS_PER_THREAD).map(|_| g.ctx.new_stream().expect("stream")).collect();
                // Each thread's own copy of the inputs, uploaded on its first stream.
                let d: Vec<DeviceInputs> = inputs
                    .iter()
                    .map(|i| DeviceInputs {
                        x: streams[0].clone_htod(&i.x).expect("upload x"),
                        w: streams[0].clone_htod(&i.w).expect("upload w"),
                        b: i.b.as_ref().map(|b| streams[0].clone_htod(b).expect("upload b")),
                    })
                    .collect();
                streams[0].synchronize().expect("sync");
                let mut pending = Vec::with_capacity(BATCH);
                for j in 0..CALLS_PER_THREAD {
                    let c = (t * 7 + j * 3 + j / cases.len()) % cases.len();
                    let stream = &streams[j % STREAMS_PER_THREAD];
                    pending.push((c, stream.clone(), call(g, stream, &cases[c], &d[c])));
                    if pending.len() == BATCH || j + 1 == CALLS_PER_THREAD {
                        for (c, stream, out) in pending.drain(..) {
                            let host = stream.clone_dtoh(&out).expect("download");
                            calls.fetch_add(1, Ordering::Relaxed);
                            if host.iter().map(|v| v.to_bits()).ne(solo[c].iter().copied()) {
                                let n = mismatches.fetch_add(1, Ordering::Relaxed);
                                if n < 8 {
                                    eprintln!("thread {t}: call of {:?} differs from its solo run", cases[c]);
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    let (calls, mismatches) = (calls.into_inner(), mismatches.into_inner());
    println!(
        "stress: {calls} calls ({THREADS} threads × {STREAMS_PER_THREAD} streams, {} templates), {mismatches} mismatches with the solo runs, {:.1?}",
        cases.len(),
        start.elapsed()
    );
    assert_eq!(calls, THREADS * CALLS_PER_THREAD);
    assert_eq!(mismatches, 0, "{mismatches} of {calls} calls differ from their solo run");
}
