//! What the crate promises about a call, stated with its public facts — a kernel's
//! [`Kernel::family`], [`Kernel::needs_aligned_rows`], [`Kernel::needs_rounded_w`],
//! [`Kernel::precision`] and launch shape, what fits on the device
//! ([`gemm_epilogue::FusedGemm::wave`]), the rounding of the handle
//! ([`gemm_epilogue::FusedGemm::precision`]) and whether W is a prepared weight — rather than by
//! re-deriving the dispatch rules (preference tables, kernel names): which forced kernels must
//! accept a case, and what every plan must satisfy.

use gemm_epilogue::{Dispatch, Error, Family, Kernel, MatrixMut, Plan, Precision};

use super::case::{out_len, Case};
use super::gpu::Gpu;
use super::inputs::DeviceInputs;
use super::poison::extent;
use super::weight::CaseWeight;

/// Multiply-adds from which Auto repacks operands into the workspace (two extra launches): below
/// it, operands whose rows are not aligned go to the 4-byte-load kernels, and on sm_90 a raw W
/// is not rounded into the workspace for a rounding TMA kernel (the mma.sync kernels that round
/// in registers run instead). The crate documents the rule, not the number's name.
pub const REPACK_MIN_MACS: u64 = 1 << 27;

/// Whether forcing `kernel` on `case` must be accepted on this device, as specified:
/// - M or N = 0: there is nothing to do, and every dispatch says so (`Ok(None)`);
/// - a kernel runs only where the device can run it, `FusedGemm::wave(kernel) > 0` (never a
///   [`Family::TmaWgmma`] kernel off sm_90: asserted here);
/// - a [`Family::TmaWgmma`] kernel refuses K = 0 (TMA cannot describe an empty row);
/// - a kernel with a [`Kernel::max_m`] (the [`Family::Skinny`] and [`Family::Gemv`] kernels,
///   which hold all of X in one tile) refuses more rows of X than that;
/// - a kernel that [`Kernel::needs_aligned_rows`] refuses operands whose rows are not 16-byte
///   aligned ([`Case::rows_aligned`], which for a prepared W means K % 4 == 0), unless the call
///   has a workspace to repack them into (which needs K > 0);
/// - a kernel that [`Kernel::needs_rounded_w`] refuses a raw W, unless the call has a workspace
///   to round it into (K > 0): it runs on a prepared weight ([`Case::prepared_w`]) or on W
///   repacked, never on the caller's W as it is.
pub fn specified_to_accept(g: &Gpu, case: &Case, kernel: Kernel) -> bool {
    if case.m == 0 || case.n == 0 {
        return true;
    }
    let runs_here = g.gemm.wave(kernel) > 0;
    if kernel.family() == Family::TmaWgmma && !g.is_hopper() {
        assert!(!runs_here, "{kernel:?} has a wave on {:?}, which is not sm_90", g.gemm.device());
    }
    let tma = kernel.family() == Family::TmaWgmma;
    let room_to_repack = case.workspace && case.k > 0;
    let form = w_form(g, case);
    // TMA reads a prepared W's 128-byte rows whatever K.
    let w_rows_ok = case.w_rows_aligned() || (tma && case.prepared_w);
    let rows_ok = !kernel.needs_aligned_rows() || (case.x_rows_aligned() && w_rows_ok) || room_to_repack;
    let w_ok = if kernel.needs_split_w() {
        form == WForm::Split || room_to_repack
    } else {
        !kernel.needs_rounded_w() || form != WForm::Raw || room_to_repack
    };
    // The mma.sync Tf32x3 kernels split a raw W themselves; a split weight is not one.
    let split_ok =
        !(kernel.precision() == Precision::Tf32x3 && !kernel.needs_split_w() && form == WForm::Split && case.k > 0);
    let m_ok = kernel.max_m().is_none_or(|rows| case.m <= rows as usize);
    runs_here && !(tma && case.k == 0) && rows_ok && w_ok && split_ok && m_ok
}

/// The form of W's values in a case: as the caller has it, or as `prepare_weight` makes it for
/// the case's precision on this device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WForm {
    Raw,
    Rounded,
    Split,
}

pub fn w_form(g: &Gpu, case: &Case) -> WForm {
    match (case.prepared_w, case.effective_precision(&g.gemm)) {
        (false, _) => WForm::Raw,
        (true, Precision::Tf32) => WForm::Rounded,
        (true, Precision::Tf32x3) if g.is_hopper() => WForm::Split,
        (true, _) => WForm::Raw,
    }
}

/// Whether [`specified_to_accept`] refuses `case` only because `kernel` needs W rounded and gets
/// neither a prepared weight nor a workspace: its refusal must then say so ("prepared weight").
fn refused_for_want_of_rounded_w(g: &Gpu, case: &Case, kernel: Kernel) -> bool {
    kernel.needs_rounded_w()
        && !specified_to_accept(g, case, kernel)
        && specified_to_accept(g, &case.prepared_w(true), kernel)
        && case.w_rows_aligned() == case.prepared_w(true).w_rows_aligned()
}

/// Asks the crate whether forcing `kernel` on `case` is accepted —
/// [`gemm_epilogue::FusedGemm::plan`] on the case's views (W prepared by the forcing handle when
/// [`Case::prepared_w`]), or for a case with a workspace
/// [`gemm_epilogue::FusedGemm::workspace_len`] (which plans with room for every repack) — asserts
/// that the answer is the specified one ([`specified_to_accept`]) and returns it. A refusal must
/// be `KernelUnavailable` naming `kernel`, and one for want of a rounded W must mention the
/// prepared weight.
pub fn accepts(g: &Gpu, case: &Case, kernel: Kernel) -> bool {
    refusal(g, case, kernel).is_none()
}

/// [`accepts`], with the crate's reason when it refuses: `None` when forcing `kernel` on `case`
/// is accepted, else the refusal's message (`KernelUnavailable`'s typed reason). Asserts, as
/// [`accepts`] does, that the answer is the specified one.
pub fn refusal(g: &Gpu, case: &Case, kernel: Kernel) -> Option<String> {
    let d = DeviceInputs::zeroed(g, case);
    let forced = case.force(kernel);
    let gemm = forced.gemm(&g.gemm);
    let (x, b) = (d.x_view(case), d.b_view(case));
    let w = CaseWeight::new(&gemm, &g.stream, case, d.w_view(case));
    let answer = if case.workspace {
        w.workspace_len(&gemm, &g.stream, &x).map(|_| ())
    } else {
        let mut out = g.stream.alloc_zeros::<f32>(out_len(case)).expect("allocate out");
        let len = extent(case.m, case.n, case.ldo());
        let o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + len), case.m, case.n, case.ldo());
        w.plan(&gemm, &g.stream, &x, b.as_ref(), &o).map(|_| ())
    };
    let mut reason = None;
    let accepted = match answer {
        Ok(()) => true,
        Err(e @ Error::KernelUnavailable { kernel: k, .. }) if k == kernel => {
            if refused_for_want_of_rounded_w(g, case, kernel) {
                assert!(e.to_string().contains("prepared weight"), "forcing {kernel:?} on {case:?}: a refusal for want of a rounded W must point to the prepared weight: {e}");
            }
            reason = Some(e.to_string());
            false
        }
        Err(e) => panic!("forcing {kernel:?} on {case:?}: expected a plan or KernelUnavailable, got {e:?}"),
    };
    let specified = specified_to_accept(g, case, kernel);
    assert_eq!(
        accepted,
        specified,
        "forcing {kernel:?} on {case:?}: the crate {} it, the specification {} it (rows aligned {}, K {}, workspace {}, prepared W {}, wave {})",
        if accepted { "accepts" } else { "refuses" },
        if specified { "accepts" } else { "refuses" },
        case.rows_aligned(),
        case.k,
        case.workspace,
        case.prepared_w,
        g.gemm.wave(kernel)
    );
    reason
}

/// The promises every plan of a non-empty `case` keeps, whatever the dispatch, and those of
/// Auto, stated with public facts:
/// - the launch is the kernel's: `cluster`, `block` and `smem_bytes` from [`Kernel::cluster_m`],
///   [`Kernel::threads`] and [`Kernel::smem_bytes`], a grid of whole clusters; no stream-K
///   and no repack without a workspace. A [`Family::Skinny`] kernel's cluster is its split of
///   K, 1 to 8 CTAs (portable clusters), and its grid one cluster per 16 rows of W, on at most
///   [`Kernel::max_m`] rows of X, never with stream-K; a [`Family::Gemv`] kernel's grid is one
///   CTA per tile of W rows, on at most [`Kernel::max_m`] rows of X, never with stream-K;
/// - repacks, exactly: X is repacked iff the kernel [`Kernel::needs_aligned_rows`] and X's rows
///   are not aligned; W is repacked iff the kernel needs aligned rows and W's are not (a prepared
///   W's are when K % 4 == 0), or the kernel [`Kernel::needs_rounded_w`] and W is not a prepared
///   weight. Nothing else is ever repacked;
/// - [`Plan::precision`] is `Tf32` iff both operands reached the tensor cores rounded: both
///   when the TMA rounded them on load; else X when the kernel rounds it ([`Kernel::precision`]
///   is `Tf32`, which for a kernel that needs W rounded means X in registers) or X was
///   repacked; W when the kernel rounds it (`Tf32` and not [`Kernel::needs_rounded_w`]), or it
///   was repacked, or it is a weight prepared by a `Tf32` handle (the only kind a `Tf32` handle
///   accepts; a `Tf32Truncated` handle's prepared weight holds W's bits as they were). `Tf32x3`
///   when both were split; else `Tf32Truncated`;
/// - [`Plan::round_on_load`] exactly for a kernel that [`Kernel::can_round_on_load`] under a
///   handle asking for at least `Tf32`, and then `Tf32`;
/// - the TMA store runs exactly for a TMA kernel and an output with 16-byte rows
///   ([`Plan::tma_store`]).
///
/// Auto, with the rounding the case asks for ([`Case::effective_precision`], by default
/// [`gemm_epilogue::FusedGemm::precision`], `Tf32` on every device):
/// - `Tf32` (and `Tf32x3`) asked is delivered, on any device;
/// - operands with aligned rows run a kernel that reads 16-byte rows (no fallback to 4-byte
///   loads);
/// - off sm_90 it runs an mma.sync kernel;
/// - on sm_90, with `Tf32` or `Tf32Truncated` asked, operands TMA can read — directly
///   ([`Case::tma_ok`]), or repacked into a workspace (K > 0 and at least [`REPACK_MIN_MACS`]
///   multiply-adds, or as the plan shows) — run a [`Family::TmaWgmma`] kernel fed from shared
///   memory, raw W or prepared (the TMA rounds on load for `Tf32`), or, for decoding sizes,
///   a [`Family::Gemv`] (M ≤ 4) or [`Family::Skinny`] (M ≤ 16) kernel on operands with
///   16-byte rows, nothing repacked.
pub fn assert_plan_keeps_the_contract(g: &Gpu, case: &Case, p: &Plan) {
    let k = p.kernel;
    let asked = case.effective_precision(&g.gemm);
    let ctx = format!(
        "{p:?} for {case:?} (rows aligned x {} w {}, prepared W {}, asked {asked:?}, hopper {})",
        case.x_rows_aligned(),
        case.w_rows_aligned(),
        case.prepared_w,
        g.is_hopper()
    );
    // The launch shape is the kernel's (a skinny kernel's cluster: its split of K).
    if k.family() == Family::Skinny {
        assert!((1..=8).contains(&p.cluster), "a skinny kernel's split of K: {ctx}");
        assert_eq!(p.grid as usize, p.cluster as usize * case.n.div_ceil(16), "one cluster per 16 rows of W: {ctx}");
        assert!(case.m <= k.max_m().expect("a skinny kernel's rows") as usize, "{ctx}");
        assert_eq!((p.stream_k_tiles, p.stream_k_ctas), (0, 0), "a skinny kernel splits K in its clusters: {ctx}");
        assert_eq!((p.block, p.smem_bytes), (k.threads(), k.smem_bytes()), "launch shape of {ctx}");
    } else {
        assert_eq!(
            (p.cluster, p.block, p.smem_bytes),
            (k.cluster_m(), k.threads(), k.smem_bytes()),
            "launch shape of {ctx}"
        );
    }
    if k.family() == Family::Gemv {
        assert_eq!(p.grid as usize, case.n.div_ceil(k.tile().1 as usize), "one CTA per tile of W rows: {ctx}");
        assert!(case.m <= k.max_m().expect("a GEMV kernel's rows") as usize, "{ctx}");
        assert_eq!((p.stream_k_tiles, p.stream_k_ctas), (0, 0), "a GEMV CTA covers all of K: {ctx}");
    }
    assert!(p.grid > 0 && p.grid % p.cluster == 0, "grid of {ctx}");
    if !case.workspace {
        assert!(!p.repack_x && !p.repack_w, "repacked without a workspace: {ctx}");
        assert_eq!((p.stream_k_tiles, p.stream_k_ctas), (0, 0), "stream-K without a workspace: {ctx}");
    }
    let form = w_form(g, case);
    // Repacks: unaligned rows for a kernel that reads 16-byte rows (TMA reads a prepared W's
    // 128-byte rows whatever K), a W not rounded for a kernel that reads W rounded, a W not split
    // for one that reads it split; nothing else.
    let w_aligned = case.w_rows_aligned() || (case.prepared_w && k.family() == Family::TmaWgmma);
    let w_ready = if k.needs_split_w() { form == WForm::Split } else { !k.needs_rounded_w() || form != WForm::Raw };
    let repack_x = k.needs_aligned_rows() && !case.x_rows_aligned();
    let repack_w = (k.needs_aligned_rows() && !w_aligned) || !w_ready;
    assert_eq!(p.repack_x, repack_x, "X is repacked iff the kernel needs aligned rows and X's are not: {ctx}");
    assert_eq!(
        p.repack_w,
        repack_w,
        "W is repacked iff the kernel needs aligned rows and W's are not, or it reads W rounded (split) and W is not: {ctx}"
    );
    // Precision: the weaker of X's and W's. X: split or rounded by the Tf32x3 and Tf32 kernels,
    // else rounded by a repack or truncated. W: a rounded W (or a split W's big parts, which is
    // all a kernel that does not read W split sees) stays rounded; a raw one is split by the
    // Tf32x3 kernels, rounded by the Tf32 ones or a repack, else truncated.
    let kp = k.precision();
    let x = match kp {
        Precision::Tf32x3 | Precision::Tf32 => kp,
        _ if p.repack_x => Precision::Tf32,
        _ => Precision::Tf32Truncated,
    };
    // (With K = 0 nothing is multiplied: a split weight's parts are never read.)
    let w = if form == WForm::Split && kp == Precision::Tf32x3 && (k.needs_split_w() || case.k == 0) && !p.repack_w {
        Precision::Tf32x3
    } else if form != WForm::Raw {
        Precision::Tf32
    } else if kp == Precision::Tf32x3 {
        Precision::Tf32x3
    } else if kp == Precision::Tf32 || p.repack_w {
        Precision::Tf32
    } else {
        Precision::Tf32Truncated
    };
    let rank = |p: Precision| {
        [Precision::Tf32Truncated, Precision::Tf32, Precision::Tf32x3].iter().position(|q| *q == p).unwrap()
    };
    // A kernel that feeds both operands from shared memory rounds them on load (TF32 tensor
    // maps) exactly when the handle asks for at least Tf32: then both are rounded, whatever
    // they were (rounding is idempotent, a split W's big parts are W rounded).
    let round_on_load = k.can_round_on_load() && asked != Precision::Tf32Truncated;
    assert_eq!(
        p.round_on_load, round_on_load,
        "round on load iff the kernel can and the handle asks for rounding: {ctx}"
    );
    let precision = if round_on_load {
        Precision::Tf32
    } else if rank(x) <= rank(w) {
        x
    } else {
        w
    };
    assert_eq!(p.precision, precision, "precision (X {x:?}, W {w:?}, round on load {round_on_load}) of {ctx}");
    // TMA store: a TMA kernel and an output with 16-byte rows at 16-byte-aligned addresses.
    let out_rows_aligned = case.off_o % 4 == 0 && case.n % 4 == 0 && case.ldo() % 4 == 0;
    assert_eq!(p.tma_store, k.family() == Family::TmaWgmma && out_rows_aligned, "TMA store of {ctx}");

    match case.dispatch {
        Dispatch::Force(forced) => assert_eq!(k, forced, "forced {forced:?} but {ctx}"),
        Dispatch::Auto => {
            if asked != Precision::Tf32Truncated {
                assert_eq!(p.precision, asked, "Auto delivers the precision asked for: {ctx}");
            }
            if case.rows_aligned() {
                assert!(k.needs_aligned_rows(), "Auto fell back to 4-byte loads on aligned rows: {ctx}");
            }
            if !g.is_hopper() {
                assert_eq!(k.family(), Family::MmaSync, "Auto off sm_90: {ctx}");
                return;
            }
            let repack_pays = case.workspace && case.k > 0 && case.macs() >= REPACK_MIN_MACS;
            let tma_readable = case.tma_ok() || repack_pays || p.repack_x || p.repack_w;
            match asked {
                _ if k.family() == Family::Skinny => {
                    assert!(
                        case.m <= 16 && case.rows_aligned() && !p.repack_x && !p.repack_w,
                        "Auto's skinny kernel on operands it reads as they are: {ctx}"
                    );
                }
                _ if k.family() == Family::Gemv => {
                    assert!(
                        case.m <= 4 && case.rows_aligned() && !p.repack_x && !p.repack_w,
                        "Auto's GEMV kernel on operands it reads as they are: {ctx}"
                    );
                }
                Precision::Tf32Truncated | Precision::Tf32 if tma_readable => {
                    assert_eq!(
                        k.family(),
                        Family::TmaWgmma,
                        "Auto on sm_90, {asked:?} asked, operands TMA can read: {ctx}"
                    );
                    assert!(
                        k.can_round_on_load(),
                        "Auto on sm_90, {asked:?}: the kernels fed from shared memory: {ctx}"
                    );
                }
                _ => {}
            }
        }
    }
}

/// Whether Auto must refuse `case` (documented): a split weight (a Tf32x3 handle's on sm_90) is
/// read by the TMA kernels alone, which need X with 16-byte rows or a workspace to repack X into.
pub fn auto_refuses(g: &Gpu, case: &Case) -> bool {
    w_form(g, case) == WForm::Split
        && !case.workspace
        && !case.x_rows_aligned()
        && case.k > 0
        && case.m > 0
        && case.n > 0
}
