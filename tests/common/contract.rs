//! What the crate promises about a call, stated with its public facts — a kernel's
//! [`Kernel::family`], [`Kernel::needs_aligned_rows`], [`Kernel::rounding`] and launch shape, what
//! fits on the device ([`FusedGemm::wave`]) and the rounding Auto delivers
//! ([`FusedGemm::rounding`]) — rather than by re-deriving the dispatch rules (preference tables,
//! kernel names): which forced kernels must accept a case, and what every plan must satisfy.

use gemm_epilogue::{Dispatch, Error, Family, FusedGemm, Kernel, MatrixMut, Plan, Tf32Rounding};

use super::case::{out_len, Case};
use super::gpu::Gpu;
use super::inputs::DeviceInputs;
use super::poison::extent;

/// Whether forcing `kernel` on `case` must be accepted on this device, as specified:
/// - M or N = 0: there is nothing to do, and every dispatch says so (`Ok(None)`);
/// - a kernel runs only where the device can run it, `FusedGemm::wave(kernel) > 0` (never a
///   [`Family::TmaWgmma`] kernel off sm_90: asserted here);
/// - a [`Family::TmaWgmma`] kernel refuses K = 0 (TMA cannot describe an empty row);
/// - a kernel that [`Kernel::needs_aligned_rows`] refuses operands whose rows are not 16-byte
///   aligned ([`Case::rows_aligned`]), unless the call has a workspace to repack them into
///   (which needs K > 0).
pub fn specified_to_accept(g: &Gpu, case: &Case, kernel: Kernel) -> bool {
    if case.m == 0 || case.n == 0 {
        return true;
    }
    let runs_here = g.gemm.wave(kernel) > 0;
    if kernel.family() == Family::TmaWgmma && !g.is_hopper() {
        assert!(!runs_here, "{kernel:?} has a wave on {:?}, which is not sm_90", g.gemm.device());
    }
    let tma = kernel.family() == Family::TmaWgmma;
    let rows_ok = !kernel.needs_aligned_rows() || case.rows_aligned() || (case.workspace && case.k > 0);
    runs_here && !(tma && case.k == 0) && rows_ok
}

/// Asks the crate whether forcing `kernel` on `case` is accepted — [`FusedGemm::plan`] on the
/// case's views, or for a case with a workspace [`FusedGemm::workspace_len`] (which plans with
/// room for every repack) — asserts that the answer is the specified one
/// ([`specified_to_accept`]) and returns it. A refusal must be `KernelUnavailable` naming
/// `kernel`.
pub fn accepts(g: &Gpu, case: &Case, kernel: Kernel) -> bool {
    let d = DeviceInputs::zeroed(g, case);
    let (x, w, b) = (d.x_view(case), d.w_view(case), d.b_view(case));
    let gemm = forced(&g.gemm, case, kernel);
    let answer = if case.workspace {
        gemm.workspace_len(&g.stream, &x, &w).map(|_| ())
    } else {
        let mut out = g.stream.alloc_zeros::<f32>(out_len(case)).expect("allocate out");
        let len = extent(case.m, case.n, case.ldo());
        let o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + len), case.m, case.n, case.ldo());
        gemm.plan(&g.stream, &x, &w, b.as_ref(), &o).map(|_| ())
    };
    let accepted = match answer {
        Ok(()) => true,
        Err(Error::KernelUnavailable { kernel: k, .. }) if k == kernel => false,
        Err(e) => panic!("forcing {kernel:?} on {case:?}: expected a plan or KernelUnavailable, got {e:?}"),
    };
    let specified = specified_to_accept(g, case, kernel);
    assert_eq!(
        accepted,
        specified,
        "forcing {kernel:?} on {case:?}: the crate {} it, the specification {} it (rows aligned {}, K {}, workspace {}, wave {})",
        if accepted { "accepts" } else { "refuses" },
        if specified { "accepts" } else { "refuses" },
        case.rows_aligned(),
        case.k,
        case.workspace,
        g.gemm.wave(kernel)
    );
    accepted
}

/// `gemm` forcing `kernel`, with the case's rounding (if any).
fn forced(gemm: &FusedGemm, case: &Case, kernel: Kernel) -> FusedGemm {
    let gemm = gemm.with_dispatch(Dispatch::Force(kernel));
    case.rounding.map_or(gemm.clone(), |r| gemm.with_rounding(r))
}

/// The promises every plan of a non-empty `case` keeps, whatever the dispatch, and those of
/// Auto, stated with public facts:
/// - the launch is the kernel's: `cluster`, `block` and `smem_bytes` from [`Kernel::cluster_m`],
///   [`Kernel::threads`] and [`Kernel::smem_bytes`], a grid of whole clusters; no stream-K
///   without a workspace;
/// - an operand whose rows are not 16-byte aligned is repacked exactly when the kernel
///   [`Kernel::needs_aligned_rows`] (so without a workspace such a case runs a kernel that does
///   not); repacks happen only with a workspace;
/// - [`Plan::rounding`] is the kernel's own, or `Nearest` when both operands were repacked; an
///   aligned operand is repacked only by Auto, together with the other, to give a truncating
///   kernel round-to-nearest operands when `Nearest` was asked for;
/// - the TMA store runs exactly for a TMA kernel and an output with 16-byte rows
///   ([`Plan::tma_store`]).
///
/// Auto, with the rounding the case asks for ([`Case::effective_rounding`], by default
/// [`FusedGemm::rounding`]):
/// - `Nearest` asked is delivered, on any device (kernels that round in registers run where no
///   truncating kernel can be fed repacked operands);
/// - operands with aligned rows run a kernel that reads 16-byte rows (no fallback to 4-byte
///   loads);
/// - on sm_90 with truncation asked, operands TMA can read (directly, or repacked into the
///   workspace) run a [`Family::TmaWgmma`] kernel.
pub fn assert_plan_keeps_the_contract(g: &Gpu, case: &Case, p: &Plan) {
    let k = p.kernel;
    let ctx = format!("{p:?} for {case:?} (rows aligned x {} w {}, hopper {})", case.x_rows_aligned(), case.w_rows_aligned(), g.is_hopper());
    // The launch shape is the kernel's.
    assert_eq!((p.cluster, p.block, p.smem_bytes), (k.cluster_m(), k.threads(), k.smem_bytes()), "launch shape of {ctx}");
    assert!(p.grid > 0 && p.grid % p.cluster == 0, "grid of {ctx}");
    if !case.workspace {
        assert!(!p.repack_x && !p.repack_w, "repacked without a workspace: {ctx}");
        assert_eq!((p.stream_k_tiles, p.stream_k_ctas), (0, 0), "stream-K without a workspace: {ctx}");
    }
    // Unaligned operands are repacked exactly for the kernels that read 16-byte rows.
    for (what, aligned, repacked) in [("x", case.x_rows_aligned(), p.repack_x), ("w", case.w_rows_aligned(), p.repack_w)] {
        if !aligned {
            assert_eq!(repacked, k.needs_aligned_rows(), "{what} has unaligned rows: repacked iff the kernel needs aligned rows; {ctx}");
        }
    }
    // Rounding: the kernel's, or to nearest by the repack of both operands.
    let both = p.repack_x && p.repack_w;
    assert_eq!(p.rounding, if both { Tf32Rounding::Nearest } else { k.rounding() }, "rounding of {ctx}");
    // TMA store: a TMA kernel and an output with 16-byte rows at 16-byte-aligned addresses.
    let out_rows_aligned = case.off_o % 4 == 0 && case.n % 4 == 0 && case.ldo() % 4 == 0;
    assert_eq!(p.tma_store, k.family() == Family::TmaWgmma && out_rows_aligned, "TMA store of {ctx}");

    let asked = case.effective_rounding(&g.gemm);
    // Aligned operands are repacked only by Auto, to round them for a truncating kernel.
    if (p.repack_x && case.x_rows_aligned()) || (p.repack_w && case.w_rows_aligned()) {
        assert!(
            case.dispatch == Dispatch::Auto && both && k.rounding() == Tf32Rounding::Truncate && asked == Tf32Rounding::Nearest,
            "repacked operands that were aligned already: {ctx}"
        );
    }
    match case.dispatch {
        Dispatch::Force(forced) => assert_eq!(k, forced, "forced {forced:?} but {ctx}"),
        Dispatch::Auto => {
            if asked == Tf32Rounding::Nearest {
                assert_eq!(p.rounding, Tf32Rounding::Nearest, "Auto asked to round to nearest: {ctx}");
            }
            if case.rows_aligned() {
                assert!(k.needs_aligned_rows(), "Auto fell back to 4-byte loads on aligned rows: {ctx}");
            }
            if g.is_hopper() && asked == Tf32Rounding::Truncate && (case.tma_ok() || p.repack_x || p.repack_w) {
                assert_eq!(k.family(), Family::TmaWgmma, "Auto on sm_90, truncation asked, operands TMA can read: {ctx}");
            }
        }
    }
}
