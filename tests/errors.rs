//! Error paths: every validation error is returned before anything is launched (the output buffer
//! keeps its poison), with the exact variant and a message naming the operand. Plus
//! `cuda_context` on a machine without a driver, which runs everywhere.

mod common;

use common::Gpu;
use gemm_epilogue::{cuda_context, Dispatch, Error, Family, Kernel, MatrixMut, MatrixRef, Operand};

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
        let planned = gemm.plan(&g.stream, &x, &w, b.as_ref(), &o);
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
    let driver = unsafe { gemm_epilogue::cudarc::driver::sys::is_culib_present() };
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
