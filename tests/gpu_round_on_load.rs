//! The rounding Auto uses for `Precision::Tf32` on sm_90: the kernels that feed X and W to
//! wgmma from shared memory (`Kernel::can_round_on_load`) read them through TF32 tensor maps
//! (`Plan::round_on_load`), and the TMA rounds each element as it writes shared memory.
//!
//! - Element by element, through identities: every such kernel forced, X through an identity W
//!   and an identity X through W, with M, N and K tails and rows padded with NaN: every element
//!   comes out rne(v), to nearest with ties to even (the counts matching rna and trunc instead are
//!   printed).
//! - Whole calls: Auto on raw operands (or a prepared W, rounded ties away before) equals the
//!   same kernel under a truncating handle (fp32 maps) on operands rounded on the host, bit for
//!   bit, on the shapes of tests/common/rounding.rs (ties and carries salted in, split-K and
//!   stream-K, with and without a workspace).
//!
//! These run on sm_90 only (they skip elsewhere).

mod common;

use common::rounding::{identity, run, run_view, tf32_rna, tf32_rne, tf32_trunc, Host, SHAPES};
use gemm_epilogue::{Dispatch, Family, Kernel, MatrixRef, Plan, Precision};

/// Auto with the default `Tf32` on sm_90 runs a kernel fed from shared memory through TF32
/// tensor maps: the TMA rounds X and W as it loads them (`Plan::round_on_load`), to nearest with
/// ties to even. On the shapes of tests/common/rounding.rs (salted with ties and carries), Auto
/// on the raw X and W (every other pair of shapes: W prepared, so rounded ties away before)
/// equals the same kernel under a truncating handle (fp32 maps) on rne(X) and rne(W) (rna(W))
/// computed on the host, bit for bit, with the same workspace (even shapes) or none (odd
/// shapes).
#[test]
fn auto_rounds_on_load_as_the_host_rounds() {
    let Some(g) = common::hopper_gpu("rounding on load (TF32 tensor maps)") else { return };
    let mut rng = common::rng("auto_rounds_on_load_as_the_host_rounds");
    assert_eq!(g.gemm.precision(), Precision::Tf32, "the default rounding");
    let auto = &g.gemm;
    let truncating = g.gemm.with_precision(Precision::Tf32Truncated);
    let mut picked = std::collections::BTreeSet::new();
    for (i, pb) in SHAPES.iter().enumerate() {
        let (m, n, k) = (pb.m, pb.n, pb.k);
        let h = Host::generate(pb, i, &mut rng);
        // The TMA rounds ties to even; a prepared W was rounded ties away before it.
        let prepared_w = i % 4 >= 2;
        let xr: Vec<f32> = h.x.iter().copied().map(tf32_rne).collect();
        let wr: Vec<f32> = h.w.iter().copied().map(if prepared_w { tf32_rna } else { tf32_rne }).collect();
        let up = |v: &[f32]| g.stream.clone_htod(v).expect("upload");
        let (x, w, xr, wr) = (up(&h.x), up(&h.w), up(&xr), up(&wr));
        let b = h.b.as_deref().map(up);
        let wv = MatrixRef::from_slice(&w, n, k);
        let mut ws = (i % 2 == 0).then(|| {
            let len = auto.workspace_len(&g.stream, &MatrixRef::from_slice(&x, m, k), &wv).expect("workspace_len");
            g.stream.clone_htod(&common::poisoned(len.max(1))).expect("upload workspace")
        });
        let (pa, oa) = if !prepared_w {
            run(&g, auto, &x, &wv, b.as_ref(), (m, n, k), h.scale, h.ldo, ws.as_mut())
        } else {
            let prepared = auto.prepare_weight(&g.stream, &wv).expect("prepare_weight");
            run(&g, auto, &x, &prepared, b.as_ref(), (m, n, k), h.scale, h.ldo, ws.as_mut())
        };
        if matches!(pa.kernel.family(), Family::Skinny | Family::Gemv) {
            // Decoding sizes: Auto's GEMV and skinny kernels round in registers, ties away
            // (gpu_rounding holds each to its truncating twin on operands rounded on the host),
            // not on load.
            assert!(
                m <= 16 && !pa.round_on_load && pa.precision == Precision::Tf32 && !pa.repack_x && !pa.repack_w,
                "{pa:?}"
            );
            println!("{m}x{n}x{k}: {:?}, not rounded on load: {pa:?}", pa.kernel.family());
            continue;
        }
        assert!(pa.round_on_load && pa.kernel.can_round_on_load(), "Auto on sm_90 rounds on load: {pa:?}");
        assert_eq!((pa.precision, pa.repack_x, pa.repack_w), (Precision::Tf32, false, false), "{pa:?}");
        let forced = truncating.with_dispatch(Dispatch::Force(pa.kernel));
        let (pt, ot) = run(
            &g,
            &forced,
            &xr,
            &MatrixRef::from_slice(&wr, n, k),
            b.as_ref(),
            (m, n, k),
            h.scale,
            h.ldo,
            ws.as_mut(),
        );
        let what = format!("Auto ({:?}, round on load) on (X, W) vs the same kernel truncating rne(X), rne(W) (rna(W) prepared), {m}x{n}x{k}, workspace {}", pa.kernel, ws.is_some());
        let schedule = |p: &Plan| (p.kernel, p.grid, p.cluster, p.stream_k_tiles, p.stream_k_ctas, p.tma_store);
        assert_eq!(schedule(&pa), schedule(&pt), "{what}: {pa:?} vs {pt:?}");
        assert_eq!(
            (pt.precision, pt.round_on_load, pt.repack_x, pt.repack_w),
            (Precision::Tf32Truncated, false, false, false),
            "{what}: {pt:?}"
        );
        common::assert_bitwise(&oa, &ot, n, &what);
        println!("{m}x{n}x{k}: bitwise equal, {pa:?}");
        picked.insert(format!("{:?}", pa.kernel));
    }
    println!("Auto picked {picked:?}");
    assert!(picked.len() >= 3, "the shapes should reach several of Auto's TMA kernels: {picked:?}");
}

/// The TMA's rounding on load, element by element: every kernel that can round on load, forced
/// under a `Tf32` handle (TF32 tensor maps), multiplies X (with padded rows, the padding NaN)
/// by an identity W, and an identity X by W (strided too), so that the output is each operand
/// exactly as the TMA wrote it to shared memory. Shapes with M, N and K tails (boxes that stop
/// at M, N and K), salted with ties of both parities and carries. Every element must be
/// rne(v); the counts of elements that match rna and trunc instead are printed.
#[test]
fn the_tma_rounds_on_load_through_identities() {
    let Some(g) = common::hopper_gpu("rounding on load (TF32 tensor maps)") else { return };
    let mut rng = common::rng("the_tma_rounds_on_load_through_identities");
    let nearest = g.gemm.with_precision(Precision::Tf32);
    let mut bad = Vec::new();
    for kernel in Kernel::ALL.into_iter().filter(|k| k.can_round_on_load()) {
        let gemm = nearest.with_dispatch(Dispatch::Force(kernel));
        for &(rows, k, pad) in &[
            (1usize, 4usize, 0usize),
            (8, 16, 4),
            (63, 16, 4),
            (65, 16, 0),
            (64, 32, 0),
            (65, 36, 4),
            (130, 68, 4),
            (300, 260, 0),
        ] {
            let ld = k + pad;
            let mut v = common::fill(rows * ld, &mut rng, |r| r.sym(1.0));
            for (i, e) in v.iter_mut().enumerate() {
                if i % ld >= k {
                    *e = f32::NAN;
                } else {
                    *e = match rng.below(8) {
                        0 | 1 => f32::from_bits((e.to_bits() & !0x1fff) | 0x1000),
                        2 => f32::from_bits((e.to_bits() & !0x3fff) | 0x3000),
                        3 => f32::from_bits(e.to_bits() | 0x007f_ffff),
                        _ => *e,
                    };
                }
            }
            let vd = g.stream.clone_htod(&v).expect("upload");
            let id = g.stream.clone_htod(&identity(k)).expect("upload");
            for operand in ["X", "W"] {
                let view = MatrixRef::with_ld(vd.slice(..), rows, k, ld);
                let (plan, out) = if operand == "X" {
                    run_view(&g, &gemm, view, &MatrixRef::from_slice(&id, k, k), None, k, 0.0, k, None)
                } else {
                    run_view(&g, &gemm, MatrixRef::from_slice(&id, k, k), &view, None, rows, 0.0, rows, None)
                };
                assert!(plan.round_on_load && plan.kernel == kernel && !plan.repack_x && !plan.repack_w, "{plan:?}");
                // out[i][j] is the operand's element (i, j) for X, (j, i) for W.
                let (mut n_rne, mut n_rna, mut n_trunc, mut ties, mut first) = (0, 0, 0, 0, None);
                for r in 0..rows {
                    for c in 0..k {
                        let e = v[r * ld + c];
                        let got = if operand == "X" { out[r * k + c] } else { out[c * rows + r] };
                        ties += (e.to_bits() & 0x1fff == 0x1000) as usize;
                        n_rne += (got == tf32_rne(e)) as usize;
                        n_rna += (got == tf32_rna(e)) as usize;
                        n_trunc += (got == tf32_trunc(e)) as usize;
                        if got != tf32_rne(e) && first.is_none() {
                            first = Some((r, c, e.to_bits(), got.to_bits()));
                        }
                    }
                }
                let line = format!("{kernel:?} {operand} {rows}x{k} ld {ld}: {} elements ({ties} ties): rne {n_rne}, rna {n_rna}, trunc {n_trunc}; first not rne (row, col, in, out) {first:x?}", rows * k);
                println!("{line}");
                if n_rne != rows * k {
                    bad.push(line);
                }
            }
        }
    }
    assert!(bad.is_empty(), "the TMA did not round these to nearest-even:\n{}", bad.join("\n"));
}
