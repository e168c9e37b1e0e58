//! Error paths: every validation error is returned before anything is launched (the output buffer
//! keeps its poison), with the exact variant and a message naming the operand — for W views and
//! for prepared weights (another shape, another rounding). Plus `cuda_context` on a machine
//! without a driver, which runs everywhere.

mod common;

use common::Gpu;
use gemm_epilogue::cudarc::driver::CudaSlice;
use gemm_epilogue::{
    cuda_context, Dispatch, Error, Family, FusedGemm, Kernel, MatrixMut, MatrixRef, Operand, Precision, PreparedWeight,
};

/// A view into a buffer: starts at `off`, `rows × cols` at stride `ld`; the buffer holds `len`
/// elements after `off` (plus a tail), and the view covers exactly those `len`.
#[derive(Clone, Copy, Debug)]
struct View {
    off: usize,
    rows: usize,
    cols: usize,
    ld: usize,
    len: usize,
}

impl View {
    /// A dense view with exactly the elements it needs.
    fn dense(rows: usize, cols: usize) -> Self {
        Self { off: 0, rows, cols, ld: cols, len: common::extent(rows, cols, cols) }
    }
    fn ld(mut self, ld: usize) -> Self {
        self.ld = ld;
        self.len = common::extent(self.rows, self.cols, ld);
        self
    }
    fn off(mut self, off: usize) -> Self {
        self.off = off;
        self
    }
    fn len(mut self, len: usize) -> Self {
        self.len = len;
        self
    }
}

/// One call.
#[derive(Clone, Copy, Debug)]
struct Call {
    x: View,
    w: View,
    /// (offset, length) of the bias view.
    bias: Option<(usize, usize)>,
    out: View,
    dispatch: Dispatch,
}

impl Call {
    /// A valid dense call.
    fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            x: View::dense(m, k),
            w: View::dense(n, k),
            bias: Some((0, n)),
            out: View::dense(m, n),
            dispatch: Dispatch::Auto,
        }
    }
}

/// Runs `call` through `plan` and `run` (and, for validation errors, the cuBLAS baseline), asserts
/// they fail alike and that the output buffer is untouched, and returns run's error.
fn expect_err(g: &Gpu, call: Call) -> Error {
    let up = |v: View| g.stream.clone_htod(&vec![0.5f32; (v.off + v.len + common::TAIL).max(1)]).unwrap();
    let (xb, wb) = (up(call.x), up(call.w));
    let bb = call.bias.map(|(off, len)| g.stream.clone_htod(&vec![0.25f32; off + len + 1]).unwrap());
    let mut ob = g.stream.clone_htod(&common::poisoned(call.out.off + call.out.len + common::TAIL)).unwrap();

    let x = MatrixRef::with_ld(xb.slice(call.x.off..call.x.off + call.x.len), call.x.rows, call.x.cols, call.x.ld);
    let w = MatrixRef::with_ld(wb.slice(call.w.off..call.w.off + call.w.len), call.w.rows, call.w.cols, call.w.ld);
    let b = bb.as_ref().zip(call.bias).map(|(bb, (off, len))| bb.slice(off..off + len));
    let gemm = g.gemm.with_dispatch(call.dispatch);
    let (planned, err, baseline) = {
        let mut o = MatrixMut::with_ld(
            ob.slice_mut(call.out.off..call.out.off + call.out.len),
            call.out.rows,
            call.out.cols,
            call.out.ld,
        );
        let planned = gemm.plan(&g.stream, &x, &w, b.as_ref(), &o.view());
        let err = match gemm.run(&g.stream, &x, &w, b.as_ref(), 0.5, &mut o) {
            Err(e) => e,
            Ok(p) => panic!("{call:?} should fail, ran {p:?}"),
        };
        let baseline = match err {
            Error::KernelUnavailable { .. } => None,
            _ => Some(g.baseline.linear_scale_residual(&x, &w, b.as_ref(), 0.5, &mut o)),
        };
        (planned, err, baseline)
    };
    match &planned {
        Err(p) => assert_eq!(format!("{p:?}"), format!("{err:?}"), "plan and run disagree for {call:?}"),
        Ok(p) => panic!("plan accepted {call:?} ({p:?}) but run failed with {err:?}"),
    }
    if let Some(r) = baseline {
        assert!(r.is_err(), "the cuBLAS baseline accepted {call:?}");
    }
    g.stream.synchronize().unwrap();
    common::assert_all_poisoned(&g.stream.clone_dtoh(&ob).unwrap(), &format!("after {err:?}"));
    println!("{call:?}\n  -> {err}");
    err
}

// ---- runs everywhere ------------------------------------------------------------------------------------

/// Without the NVIDIA driver `cuda_context` returns `NoDriver` instead of panicking; with a driver
/// it returns a context or `NoDevice`.
#[test]
fn cuda_context_without_driver_is_an_error_not_a_panic() {
    let r = std::panic::catch_unwind(|| cuda_context(0));
    let r = r.expect("cuda_context(0) panicked");
    // The oracle: libcuda loads and is a driver, not a toolkit's stub library (which answers
    // every call with CUDA_ERROR_STUB_LIBRARY, as the link stubs of .ci/candle-env do).
    // SAFETY: loads the library (its initialisers run, as cudarc's loading does) and, only when
    // it loaded, asks its version into a local.
    let loads = ["libcuda.so.1", "libcuda.so", "nvcuda.dll"]
        .into_iter()
        .any(|n| unsafe { libloading::Library::new(n) }.is_ok());
    let driver = loads && {
        use gemm_epilogue::cudarc::driver::sys;
        let mut version = 0;
        let status = unsafe { sys::cuDriverGetVersion(&mut version) };
        status != sys::cudaError_enum::CUDA_ERROR_STUB_LIBRARY
    };
    match r {
        Err(Error::NoDriver) => {
            assert!(!driver, "NoDriver although libcuda loads");
            let msg = Error::NoDriver.to_string();
            assert!(msg.contains("driver"), "{msg}");
            println!("no driver: {msg}");
        }
        Ok(ctx) => {
            assert!(driver);
            println!("driver present, device 0 opened: {:?}", ctx.compute_capability());
        }
        Err(e @ Error::NoDevice { ordinal: 0, count: 0 }) => {
            assert!(driver);
            println!("driver present, {e}");
        }
        Err(e) => panic!("unexpected error from cuda_context(0): {e:?}"),
    }
    // An ordinal past the last device is NoDevice (or NoDriver without a driver), never a panic.
    let r = std::panic::catch_unwind(|| cuda_context(1 << 20)).expect("cuda_context(2^20) panicked");
    assert!(
        matches!(r, Err(Error::NoDriver) if !driver)
            || matches!(r, Err(Error::NoDevice { ordinal, .. }) if ordinal == 1 << 20),
        "{r:?}"
    );
}

// ---- validation errors ----------------------------------------------------------------------------------------

#[test]
fn shape_mismatch_each_way() {
    let Some(g) = common::gpu() else { return };
    let (m, n, k) = (40, 24, 16);

    let mut c = Call::new(m, n, k);
    c.w = View::dense(n, k + 4);
    let e = expect_err(&g, c);
    assert!(matches!(e, Error::ShapeMismatch { expected: 16, found: 20, .. }), "{e:?}");
    assert!(e.to_string().contains("w.cols"), "{e}");

    let mut c = Call::new(m, n, k);
    c.out = View::dense(m + 1, n);
    let e = expect_err(&g, c);
    assert!(matches!(e, Error::ShapeMismatch { expected: 40, found: 41, .. }), "{e:?}");
    assert!(e.to_string().contains("out.rows"), "{e}");

    let mut c = Call::new(m, n, k);
    c.out = View::dense(m, n - 1);
    let e = expect_err(&g, c);
    assert!(matches!(e, Error::ShapeMismatch { expected: 24, found: 23, .. }), "{e:?}");
    assert!(e.to_string().contains("out.cols"), "{e}");

    for len in [n - 1, n + 1, 1] {
        let mut c = Call::new(m, n, k);
        c.bias = Some((0, len));
        let e = expect_err(&g, c);
        assert!(matches!(e, Error::ShapeMismatch { expected, found, .. } if expected == n && found == len), "{e:?}");
        assert!(e.to_string().contains("bias"), "{e}");
    }
}

#[test]
fn leading_dimension_smaller_than_cols() {
    let Some(g) = common::gpu() else { return };
    let (m, n, k) = (40, 24, 16);
    for (operand, name) in [(Operand::X, "x"), (Operand::W, "w"), (Operand::Out, "out")] {
        let mut c = Call::new(m, n, k);
        match operand {
            Operand::X => c.x = View::dense(m, k).ld(k - 1).len(m * k),
            Operand::W => c.w = View::dense(n, k).ld(k - 3).len(n * k),
            _ => c.out = View::dense(m, n).ld(n - 1).len(m * n),
        }
        let e = expect_err(&g, c);
        assert!(matches!(e, Error::LeadingDimension { operand: o, .. } if o == operand), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{name}: ")), "{e}");
    }
}

#[test]
fn buffer_too_small_each_operand() {
    let Some(g) = common::gpu() else { return };
    let (m, n, k) = (40, 24, 16);
    // Dense, one element short.
    for (operand, name, needed) in [(Operand::X, "x", m * k), (Operand::W, "w", n * k), (Operand::Out, "out", m * n)] {
        let mut c = Call::new(m, n, k);
        match operand {
            Operand::X => c.x = c.x.len(needed - 1),
            Operand::W => c.w = c.w.len(needed - 1),
            _ => c.out = c.out.len(needed - 1),
        }
        let e = expect_err(&g, c);
        assert!(
            matches!(e, Error::BufferTooSmall { operand: o, needed: nd, len } if o == operand && nd == needed && len == needed - 1),
            "{e:?}"
        );
        assert!(e.to_string().starts_with(&format!("{name}: ")), "{e}");
    }
    // Strided: the last row needs only `cols`, so (rows − 1)·ld + cols is enough and one less is not.
    let mut c = Call::new(m, n, k);
    c.x = View::dense(m, k).ld(k + 8);
    c.x = c.x.len(c.x.len - 1);
    let e = expect_err(&g, c);
    assert!(
        matches!(e, Error::BufferTooSmall { operand: Operand::X, needed, .. } if needed == (m - 1) * (k + 8) + k),
        "{e:?}"
    );
    let mut c = Call::new(m, n, k);
    c.out = View::dense(m, n).ld(n + 3).off(1);
    c.out = c.out.len(c.out.len - 1);
    let e = expect_err(&g, c);
    assert!(
        matches!(e, Error::BufferTooSmall { operand: Operand::Out, needed, .. } if needed == (m - 1) * (n + 3) + n),
        "{e:?}"
    );
}

/// M beyond i32 is refused before the extents are even looked at (views can claim any shape).
#[test]
fn dimension_too_large() {
    let Some(g) = common::gpu() else { return };
    let big = i32::MAX as usize + 1;
    let mut c = Call::new(4, 8, 0);
    c.x = View { off: 0, rows: big, cols: 0, ld: 0, len: 4 };
    c.out = View { off: 0, rows: big, cols: 8, ld: 8, len: 64 };
    let e = expect_err(&g, c);
    assert!(matches!(e, Error::DimensionTooLarge { what: "M", value, .. } if value == big), "{e:?}");
    assert!(e.to_string().contains("M = "), "{e}");
}

// ---- forced kernels that cannot run ---------------------------------------------------------------------------

fn assert_unavailable(e: &Error, kernel: Kernel) {
    assert!(matches!(e, Error::KernelUnavailable { kernel: k, .. } if *k == kernel), "{e:?}");
    assert!(e.to_string().contains(kernel.name()), "{e}");
}

/// Inputs the kernels that read 16-byte rows cannot take without a workspace: x or w not 16-byte
/// aligned, K % 4 ≠ 0, leading dimensions not multiples of 4.
fn unaligned_calls() -> Vec<(&'static str, Call)> {
    let (m, n, k) = (130, 70, 64);
    let mut v = Vec::new();
    let mut c = Call::new(m, n, k);
    c.x = c.x.off(1);
    v.push(("x at offset 1", c));
    let mut c = Call::new(m, n, k);
    c.w = c.w.off(2);
    v.push(("w at offset 2", c));
    v.push(("K = 6", Call::new(m, n, 6)));
    v.push(("K = 1", Call::new(m, n, 1)));
    let mut c = Call::new(m, n, k);
    c.x = View::dense(m, k).ld(k + 1);
    v.push(("ldx = K + 1", c));
    let mut c = Call::new(m, n, k);
    c.w = View::dense(n, k).ld(k + 2);
    v.push(("ldw = K + 2", c));
    v
}

/// The TMA + wgmma kernels refuse what TMA cannot read (rows that are not 16-byte aligned, with
/// no workspace; K = 0), and off sm_90 everything.
#[test]
fn forced_tma_wgmma_kernels_on_unsupported_input() {
    let Some(g) = common::gpu() else { return };
    for kernel in Kernel::ALL.into_iter().filter(|k| k.family() == Family::TmaWgmma) {
        let mut calls = unaligned_calls();
        calls.push(("K = 0", Call::new(64, 64, 0)));
        for (what, mut c) in calls {
            c.dispatch = Dispatch::Force(kernel);
            let e = expect_err(&g, c);
            assert_unavailable(&e, kernel);
            println!("{kernel:?}, {what}: {e}");
        }
        if !g.is_hopper() {
            // Off sm_90 it cannot run even aligned input.
            let mut c = Call::new(128, 128, 64);
            c.dispatch = Dispatch::Force(kernel);
            let e = expect_err(&g, c);
            assert_unavailable(&e, kernel);
        }
    }
}

/// The mma.sync kernels that read 16-byte rows ([`Kernel::needs_aligned_rows`]) refuse operands
/// whose rows are not 16-byte aligned when there is no workspace to repack them into.
#[test]
fn forced_aligned_row_kernels_on_unaligned_input() {
    let Some(g) = common::gpu() else { return };
    let aligned_rows: Vec<Kernel> =
        Kernel::ALL.into_iter().filter(|&k| k.needs_aligned_rows() && k.family() == Family::MmaSync).collect();
    assert!(aligned_rows.contains(&Kernel::Sm80Mma128x128Vec4) && aligned_rows.contains(&Kernel::Sm80Mma64x64Vec4));
    for kernel in aligned_rows {
        for (what, mut c) in unaligned_calls() {
            c.dispatch = Dispatch::Force(kernel);
            let e = expect_err(&g, c);
            assert_unavailable(&e, kernel);
            println!("{kernel:?}, {what}: {e}");
        }
    }
}

/// A validation error wins over an unavailable forced kernel: nothing is selected for a call that
/// is invalid anyway.
#[test]
fn validation_comes_before_kernel_selection() {
    let Some(g) = common::gpu() else { return };
    let mut c = Call::new(64, 64, 6);
    c.dispatch = Dispatch::Force(Kernel::Sm80Mma128x128Vec4);
    c.bias = Some((0, 63));
    let e = expect_err(&g, c);
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e:?}");
}

// ---- prepared weights ---------------------------------------------------------------------------

/// Runs `x` (M × K, dense, 0.5) against the prepared weight `w` into a poisoned `out_rows ×
/// out_cols` output through `plan`, `run` and `run_with_workspace` (with a poisoned workspace),
/// asserts they all fail alike, that `workspace_len` fails alike too when `sized_by_workspace_len`
/// (it sees X and W but not the output, so it accepts what only the output gets wrong), and that
/// neither the output nor the workspace was written. Returns the error.
fn expect_prepared_err(
    g: &Gpu,
    gemm: &FusedGemm,
    x: (usize, usize),
    w: &PreparedWeight,
    out: (usize, usize),
    sized_by_workspace_len: bool,
) -> Error {
    let (m, k) = x;
    let xb = g.stream.clone_htod(&vec![0.5f32; m * k + common::TAIL]).unwrap();
    let bb = g.stream.clone_htod(&vec![0.25f32; w.rows()]).unwrap();
    let olen = out.0 * out.1;
    let mut ob = g.stream.clone_htod(&common::poisoned(olen + common::TAIL)).unwrap();
    let mut wsb = g.stream.clone_htod(&common::poisoned(1 << 20)).unwrap();
    let xv = MatrixRef::new(xb.slice(0..m * k), m, k);
    let b = bb.as_view();
    let (planned, ran, ran_ws, sized) = {
        let mut o = MatrixMut::new(ob.slice_mut(0..olen), out.0, out.1);
        let planned = gemm.plan(&g.stream, &xv, w, Some(&b), &o.view());
        let ran = gemm.run(&g.stream, &xv, w, Some(&b), 0.5, &mut o);
        let ran_ws = gemm.run_with_workspace(&g.stream, &xv, w, Some(&b), 0.5, &mut o, &mut wsb.as_view_mut());
        (planned, ran, ran_ws, gemm.workspace_len(&g.stream, &xv, w))
    };
    let err = match ran {
        Err(e) => e,
        Ok(p) => panic!(
            "{x:?} with a prepared {}x{} ({:?}) into {out:?} should fail, ran {p:?}",
            w.rows(),
            w.cols(),
            w.precision()
        ),
    };
    let same = |what: &str, r: Result<String, String>| match r {
        Err(e) => assert_eq!(e, format!("{err:?}"), "{what} and run disagree"),
        Ok(p) => panic!("{what} accepted ({p}) what run refused with {err:?}"),
    };
    same("plan", planned.map(|p| format!("{p:?}")).map_err(|e| format!("{e:?}")));
    same("run_with_workspace", ran_ws.map(|p| format!("{p:?}")).map_err(|e| format!("{e:?}")));
    if sized_by_workspace_len {
        same("workspace_len", sized.map(|l| l.to_string()).map_err(|e| format!("{e:?}")));
    } else {
        assert!(sized.is_ok(), "workspace_len does not see the output: {sized:?}");
    }
    g.stream.synchronize().unwrap();
    common::assert_all_poisoned(&g.stream.clone_dtoh(&ob).unwrap(), &format!("out after {err:?}"));
    common::assert_all_poisoned(&g.stream.clone_dtoh(&wsb).unwrap(), &format!("workspace after {err:?}"));
    println!(
        "x {x:?}, prepared {}x{} ({:?}), out {out:?}, {:?}\n  -> {err}",
        w.rows(),
        w.cols(),
        w.precision(),
        gemm.dispatch()
    );
    err
}

/// A W to prepare: N × K of 0.25.
fn w_buffer(g: &Gpu, n: usize, k: usize) -> CudaSlice<f32> {
    g.stream.clone_htod(&vec![0.25f32; n * k]).unwrap()
}

/// Dispatches every prepared-weight refusal must hold for: Auto, a kernel that reads W rounded
/// (refused anyway off sm_90: validation comes first) and an mma.sync kernel.
fn prepared_dispatches() -> [Dispatch; 3] {
    [Dispatch::Auto, Dispatch::Force(Kernel::Sm90Pingpong128x128RmemA), Dispatch::Force(Kernel::Sm80Mma64x64Vec4)]
}

/// A prepared N × K weight is validated like a W view: X of another K, or an output of another
/// N, is a `ShapeMismatch` (X's K in `workspace_len` too), and nothing is written.
#[test]
fn prepared_weight_of_another_shape() {
    let Some(g) = common::gpu() else { return };
    let (m, n, k) = (40, 24, 16);
    let wb = w_buffer(&g, n, k);
    let prepared = g.gemm.prepare_weight(&g.stream, &MatrixRef::from_slice(&wb, n, k)).expect("prepare_weight");
    assert_eq!((prepared.rows(), prepared.cols(), prepared.ld(), prepared.precision()), (n, k, 32, g.gemm.precision()));
    for d in prepared_dispatches() {
        let gemm = g.gemm.with_dispatch(d);
        let e = expect_prepared_err(&g, &gemm, (m, k + 4), &prepared, (m, n), true);
        assert!(matches!(e, Error::ShapeMismatch { expected: 20, found: 16, .. }), "{e:?}");
        assert!(e.to_string().contains("w.cols"), "{e}");
        let e = expect_prepared_err(&g, &gemm, (m, k), &prepared, (m, n - 1), false);
        assert!(matches!(e, Error::ShapeMismatch { expected: 24, found: 23, .. }), "{e:?}");
        assert!(e.to_string().contains("out.cols"), "{e}");
    }
}

/// A prepared weight serves only handles of the rounding that prepared it (rounded to TF32 for
/// `Nearest`, W's bits for `Truncate`): any other is refused with `PreparedForOtherPrecision`
/// naming both roundings, by `plan`, `workspace_len` and both runs, and nothing is written. The
/// same weight on a handle of its own rounding is accepted.
#[test]
fn prepared_weight_of_another_rounding() {
    let Some(g) = common::gpu() else { return };
    let (m, n, k) = (40, 24, 16);
    let wb = w_buffer(&g, n, k);
    for (prepared_for, asked) in
        [(Precision::Tf32Truncated, Precision::Tf32), (Precision::Tf32, Precision::Tf32Truncated)]
    {
        let preparer = g.gemm.with_precision(prepared_for);
        let prepared = preparer.prepare_weight(&g.stream, &MatrixRef::from_slice(&wb, n, k)).expect("prepare_weight");
        assert_eq!(prepared.precision(), prepared_for);
        for d in prepared_dispatches() {
            let gemm = g.gemm.with_precision(asked).with_dispatch(d);
            let e = expect_prepared_err(&g, &gemm, (m, k), &prepared, (m, n), true);
            assert!(
                matches!(e, Error::PreparedForOtherPrecision { prepared: p, asked: a } if p == prepared_for && a == asked),
                "{e:?}"
            );
            let text = e.to_string();
            assert!(
                text.starts_with("w:")
                    && text.contains(&format!("{prepared_for:?}"))
                    && text.contains(&format!("{asked:?}")),
                "{text}"
            );
        }
        // Its own rounding accepts it (Auto; a forced kernel may still refuse, for its own reasons).
        let xb = g.stream.clone_htod(&vec![0.5f32; m * k]).unwrap();
        let mut ob = g.stream.alloc_zeros::<f32>(m * n).unwrap();
        let o = MatrixMut::from_slice(&mut ob, m, n);
        let plan =
            preparer.plan(&g.stream, &MatrixRef::from_slice(&xb, m, k), &prepared, None, &o.view()).expect("plan");
        assert!(plan.is_some(), "{plan:?}");
    }
}

// Wrong context: the tests have no second CUDA context to take a buffer or a stream from
// (`cuda_context` retains the device's primary context, so a second call returns the same
// one), so `prepare_weight` and the calls are not tested with a W of another context here.

/// `prepare_weight` validates the W view it copies: a leading dimension below K, or a buffer too
/// short for N rows, is refused before anything is allocated or launched.
#[test]
fn prepare_weight_validates_w() {
    let Some(g) = common::gpu() else { return };
    let (n, k) = (24, 16);
    let wb = w_buffer(&g, n, k);
    let e = g.gemm.prepare_weight(&g.stream, &MatrixRef::with_ld(wb.slice(0..n * k), n, k, k - 1)).unwrap_err();
    assert!(matches!(e, Error::LeadingDimension { operand: Operand::W, ld: 15, cols: 16 }), "{e:?}");
    let e = g.gemm.prepare_weight(&g.stream, &MatrixRef::new(wb.slice(0..n * k - 1), n, k)).unwrap_err();
    assert!(
        matches!(e, Error::BufferTooSmall { operand: Operand::W, needed, len } if needed == n * k && len == n * k - 1),
        "{e:?}"
    );
}

/// A kernel that rounds X in registers and reads W as given ([`Kernel::needs_rounded_w`]) runs
/// only on W rounded: forced on a raw W without a workspace it is refused with
/// `KernelUnavailable` pointing to the prepared weight (and writes nothing); on a prepared W it
/// plans without a workspace and without a repack; on a raw W with a workspace it rounds W into
/// it (`workspace_len` counts N rows of K rounded up to 32).
#[test]
fn forced_rounding_kernels_need_a_prepared_or_repacked_w() {
    let Some(g) = common::gpu() else { return };
    let (m, n, k) = (130, 70, 64);
    let readers: Vec<Kernel> = Kernel::ALL.into_iter().filter(|k| k.needs_rounded_w()).collect();
    assert_eq!(readers.len(), 6, "{readers:?}");
    for kernel in readers {
        assert_eq!((kernel.family(), kernel.precision()), (Family::TmaWgmma, Precision::Tf32), "{kernel:?}");
        let mut c = Call::new(m, n, k);
        c.dispatch = Dispatch::Force(kernel);
        let e = expect_err(&g, c);
        assert_unavailable(&e, kernel);
        if !g.is_hopper() {
            continue;
        }
        assert!(e.to_string().contains("prepared weight"), "{e}");
        let gemm = g.gemm.with_dispatch(Dispatch::Force(kernel));
        let wb = w_buffer(&g, n, k);
        let w = MatrixRef::from_slice(&wb, n, k);
        let prepared = gemm.prepare_weight(&g.stream, &w).expect("prepare_weight");
        let xb = g.stream.clone_htod(&vec![0.5f32; m * k]).unwrap();
        let x = MatrixRef::from_slice(&xb, m, k);
        let mut ob = g.stream.alloc_zeros::<f32>(m * n).unwrap();
        let o = MatrixMut::from_slice(&mut ob, m, n);
        let p = gemm.plan(&g.stream, &x, &prepared, None, &o.view()).expect("plan").expect("non-empty");
        assert_eq!(
            (p.kernel, p.repack_x, p.repack_w, p.precision, p.workspace_len()),
            (kernel, false, false, Precision::Tf32, 0),
            "{p:?}"
        );
        assert_eq!(
            gemm.workspace_len(&g.stream, &x, &prepared).expect("workspace_len"),
            0,
            "{kernel:?} on a prepared W"
        );
        let len = gemm.workspace_len(&g.stream, &x, &w).expect("workspace_len");
        assert!(len >= n * k.next_multiple_of(32), "{kernel:?} on a raw W: {len}");
    }
}
