//! A workspace a caller holds: `max_workspace_len` bounds every call of a shape,
//! `plan_with_workspace` says what a length runs, `Linear` keeps its workspace across calls, and
//! `run_raw` (raw addresses) runs the same plan and checks what it is given.

mod common;

use gemm_epilogue::cudarc::driver::{DevicePtr, DevicePtrMut};
use gemm_epilogue::{Dispatch, Error, Kernel, Linear, MatrixMut, MatrixRef, Operand, RawBuffer, RawMatrix};

#[test]
fn linear_allocates_its_workspace_once_per_larger_shape() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("linear_allocates_its_workspace_once_per_larger_shape");
    // K % 4 != 0: x is repacked into the workspace on every call.
    let (k, n) = (1027, 384);
    let w = g.stream.clone_htod(&common::fill(n * k, &mut rng, |r| r.sym(0.03))).expect("w");
    let layer = Linear::new(g.gemm.clone(), w, None, k, n, 0.5).expect("Linear");
    // `forward` takes a dense rows × K buffer: one per row count.
    let mut x_rows = |rows: usize| g.stream.clone_htod(&common::fill(rows * k, &mut rng, |r| r.unit())).expect("x");
    let (x, x4096, x300) = (x_rows(1024), x_rows(4096), x_rows(300));
    let first = layer.forward(&x, 1024).expect("forward").expect("non-empty");
    assert_eq!(layer.workspace_allocations(), 1);
    let held = layer.workspace_len();
    let want = g
        .gemm
        .workspace_len(&g.stream, &MatrixRef::from_slice(&x, 1024, k), layer.prepared_weight())
        .expect("workspace_len");
    assert_eq!(held, want, "the layer holds what the call wants");
    for _ in 0..10 {
        let again = layer.forward(&x, 1024).expect("forward").expect("non-empty");
        assert_eq!(
            g.stream.clone_dtoh(&again).expect("dl"),
            g.stream.clone_dtoh(&first).expect("dl"),
            "a held workspace gives the same bits"
        );
    }
    assert_eq!((layer.workspace_allocations(), layer.workspace_len()), (1, held), "a repeated shape allocates nothing");
    layer.forward(&x4096, 4096).expect("more rows");
    layer.forward(&x4096, 4096).expect("more rows again");
    assert_eq!(layer.workspace_allocations(), 2, "a larger call grows it once");
    layer.forward(&x, 1024).expect("the first shape again");
    layer.forward(&x300, 300).expect("fewer rows");
    assert_eq!(layer.workspace_allocations(), 2, "calls needing less than held allocate nothing");
    assert!(layer.workspace_len() >= held);
}

#[test]
fn max_workspace_len_bounds_every_call_and_plan_with_workspace_says_what_runs() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("max_workspace_len_bounds_every_call_and_plan_with_workspace_says_what_runs");
    for (m, n, k) in [(1, 4096, 4096), (257, 130, 131), (2048, 1024, 1029), (16, 64, 8192)] {
        let bound = g.gemm.max_workspace_len(m, n, k).expect("bound");
        let x = g.stream.clone_htod(&common::fill(m * k + 1, &mut rng, |r| r.unit())).expect("x");
        let w = g.stream.clone_htod(&common::fill(n * k, &mut rng, |r| r.sym(0.03))).expect("w");
        let mut out = g.stream.alloc_zeros::<f32>(m * n).expect("out");
        // Aligned and misaligned x (offset 1 element), raw W.
        for off in [0, 1] {
            let xv = MatrixRef::new(x.slice(off..off + m * k), m, k);
            let wv = MatrixRef::from_slice(&w, n, k);
            let want = g.gemm.workspace_len(&g.stream, &xv, &wv).expect("workspace_len");
            assert!(want <= bound, "{m}×{n}×{k} off {off}: wants {want} > bound {bound}");
            for len in [0, want / 2, want, bound] {
                let planned = g
                    .gemm
                    .plan_with_workspace(&g.stream, &xv, &wv, None, &MatrixRef::from_slice(&out, m, n), len)
                    .expect("plan");
                let mut ws = g.stream.alloc_zeros::<f32>(len.max(1)).expect("ws");
                let ran = g
                    .gemm
                    .run_with_workspace(
                        &g.stream,
                        &xv,
                        &wv,
                        None,
                        0.5,
                        &mut MatrixMut::from_slice(&mut out, m, n),
                        &mut ws.slice_mut(0..len),
                    )
                    .expect("run");
                assert_eq!(planned, ran, "{m}×{n}×{k} off {off} len {len}");
                assert!(ran.is_some_and(|p| p.workspace_len() <= len));
            }
        }
    }
    assert_eq!(g.gemm.max_workspace_len(0, 5, 5).expect("empty"), 0);
    assert!(matches!(g.gemm.max_workspace_len(1 << 31, 5, 5), Err(Error::DimensionTooLarge { .. })));
}

#[test]
fn run_raw_matches_run_and_checks_raw_addresses() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("run_raw_matches_run_and_checks_raw_addresses");
    let (m, n, k) = (300, 200, 131);
    let x = g.stream.clone_htod(&common::fill(m * k, &mut rng, |r| r.unit())).expect("x");
    let w = g.stream.clone_htod(&common::fill(n * k, &mut rng, |r| r.sym(0.08))).expect("w");
    let b = g.stream.clone_htod(&common::fill(n, &mut rng, |r| r.sym(0.08))).expect("b");
    let mut want = g.stream.alloc_zeros::<f32>(m * n).expect("out");
    let mut got = g.stream.clone_htod(&common::poisoned(m * n)).expect("out");
    let ws_len = g.gemm.max_workspace_len(m, n, k).expect("bound");
    let mut ws = g.stream.alloc_zeros::<f32>(ws_len.max(1)).expect("ws");
    let plan = g
        .gemm
        .run_with_workspace(
            &g.stream,
            &MatrixRef::from_slice(&x, m, k),
            &MatrixRef::from_slice(&w, n, k),
            Some(&b.as_view()),
            0.5,
            &mut MatrixMut::from_slice(&mut want, m, n),
            &mut ws.as_view_mut(),
        )
        .expect("run");
    g.stream.synchronize().expect("sync");
    let (xp, _gx) = x.device_ptr(&g.stream);
    let (wp, _gw) = w.device_ptr(&g.stream);
    let (bp, _gb) = b.device_ptr(&g.stream);
    let (op, _go) = got.device_ptr_mut(&g.stream);
    let (wsp, _gws) = ws.device_ptr_mut(&g.stream);
    let raw = |x: RawMatrix, out: RawMatrix, ws: RawBuffer| {
        // SAFETY: every address is a live allocation of this context, used on g.stream only,
        // synchronised below before anything else touches them.
        unsafe {
            g.gemm.run_raw(
                g.stream.cu_stream() as *mut std::ffi::c_void,
                x,
                RawMatrix::dense(wp, n, k),
                Some(RawBuffer { ptr: bp, len: n }),
                0.5,
                out,
                Some(ws),
            )
        }
    };
    let ws_raw = RawBuffer { ptr: wsp, len: ws_len };
    let ran = raw(RawMatrix::dense(xp, m, k), RawMatrix::dense(op, m, n), ws_raw).expect("run_raw");
    assert_eq!(ran, plan, "the same plan as the safe call");
    g.stream.synchronize().expect("sync");
    drop((_go, _gws));
    assert_eq!(
        g.stream.clone_dtoh(&got).expect("dl"),
        g.stream.clone_dtoh(&want).expect("dl"),
        "the same bits as the safe call"
    );

    let (op, _go) = got.device_ptr_mut(&g.stream);
    // A length the allocation does not have (64 MiB past it: past any allocation granularity).
    let rows = m + (1 << 17);
    assert!(matches!(
        raw(RawMatrix::dense(xp, rows, k), RawMatrix::dense(op, rows, n), ws_raw),
        Err(Error::BufferTooSmall { operand: Operand::X, .. })
    ));
    // Misaligned, overlapping, not device memory, a misaligned workspace.
    assert!(matches!(
        raw(RawMatrix { ptr: xp + 2, ..RawMatrix::dense(xp, m - 1, k) }, RawMatrix::dense(op, m - 1, n), ws_raw),
        Err(Error::MisalignedPointer { operand: Operand::X, .. })
    ));
    assert!(matches!(
        raw(RawMatrix::dense(xp, 50, k), RawMatrix::dense(xp + 400, 50, n), ws_raw),
        Err(Error::Overlapping { operand: Operand::Out, with: Operand::X })
    ));
    assert!(matches!(raw(RawMatrix::dense(0x1000, m, k), RawMatrix::dense(op, m, n), ws_raw), Err(Error::Driver(_))));
    assert!(matches!(
        raw(RawMatrix::dense(xp, m, k), RawMatrix::dense(op, m, n), RawBuffer { ptr: wsp + 4, len: 8 }),
        Err(Error::MisalignedWorkspace { .. })
    ));
    // Nothing of that was written.
    g.stream.synchronize().expect("sync");
    drop(_go);
    assert_eq!(
        g.stream.clone_dtoh(&got).expect("dl"),
        g.stream.clone_dtoh(&want).expect("dl"),
        "a refused call writes nothing"
    );
}

/// Stream-K needs no zeroed workspace: its hand-off words carry each launch's own number
/// (GeStreamK). One workspace, filled with random bits once and then left as each call leaves
/// it, runs split-K and shared-tail plans of different layouts one after another, so each finds
/// random bits, partial tiles or an earlier launch's words where its own words lie. Each output
/// must be bitwise what the same call writes with a fresh, zeroed workspace (the partial tiles
/// are added in a fixed order), which `stream_k_shapes*` check against f64 and cuBLAS.
#[test]
fn stream_k_runs_on_whatever_the_workspace_holds() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("stream_k_runs_on_whatever_the_workspace_holds");
    // Split-K at M = 1 and 16 in 2 to 5 parts, with M and N tails, the same shape twice (the
    // second finds the first's words, a launch number apart), and the reference shape's shared
    // tail (the cooperative cluster kernel: two ready words per cluster slot).
    let shapes =
        [(1, 4032, 4096), (1, 768, 3072), (129, 1000, 2048), (1, 768, 3072), (16384, 4096, 4096), (16, 3072, 2048)];
    let len = shapes.iter().map(|&(m, n, k)| g.gemm.max_workspace_len(m, n, k).expect("bound")).max().expect("shapes");
    let random_bits: Vec<f32> = (0..len).map(|_| f32::from_bits(rng.next_u64() as u32)).collect();
    let mut ws = g.stream.clone_htod(&random_bits).expect("workspace");
    let mut shared = 0;
    for &(m, n, k) in &shapes {
        let x = g.stream.clone_htod(&common::fill(m * k, &mut rng, |r| r.unit())).expect("x");
        let w = g.stream.clone_htod(&common::fill(n * k, &mut rng, |r| r.sym(0.03))).expect("w");
        let b = g.stream.clone_htod(&common::fill(n, &mut rng, |r| r.sym(0.03))).expect("b");
        let (xv, wv) = (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k));
        // Decoding sizes go to the skinny kernels, which split K without the workspace: these
        // force the 64×64 ping-pong Auto ran on them before.
        let forced = g.gemm.with_dispatch(Dispatch::Force(Kernel::Sm90Pingpong64x64SmemA));
        let gemm = if m <= 16 && g.is_hopper() { &forced } else { &g.gemm };
        let run = |ws: &mut gemm_epilogue::cudarc::driver::CudaSlice<f32>| {
            let mut out = g.stream.clone_htod(&common::poisoned(m * n)).expect("out");
            let plan = gemm
                .run_with_workspace(
                    &g.stream,
                    &xv,
                    &wv,
                    Some(&b.as_view()),
                    0.5,
                    &mut MatrixMut::from_slice(&mut out, m, n),
                    &mut ws.as_view_mut(),
                )
                .expect("run")
                .expect("a plan");
            (plan, g.stream.clone_dtoh(&out).expect("download"))
        };
        let (plan, got) = run(&mut ws);
        let (fresh_plan, want) = run(&mut g.stream.alloc_zeros::<f32>(len).expect("fresh workspace"));
        assert_eq!(plan, fresh_plan, "{m}×{n}×{k}");
        let differ = got.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differ, 0, "{m}×{n}×{k} ({plan:?}): {differ} of {} outputs differ from a fresh workspace's", m * n);
        shared += usize::from(plan.stream_k_tiles > 0);
        println!("{m}×{n}×{k}: {plan:?}");
    }
    if g.gemm.device().sm_count == 132 {
        assert_eq!(shared, shapes.len(), "every shape shares tiles along K on an H200");
    }
}
