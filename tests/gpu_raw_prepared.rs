//! Prepared weights in caller-owned memory: `prepare_weight_raw` writes what `prepare_weight`
//! makes, and `run_raw_prepared` computes exactly what `run_with_workspace` computes with a
//! `PreparedWeight` (the same plan, the same bits), for every precision, on odd and strided
//! shapes; bad descriptors and buffers are refused before anything is written.

mod common;

use std::ffi::c_void;

use gemm_epilogue::cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use gemm_epilogue::{Error, MatrixMut, MatrixRef, Operand, Precision, RawBuffer, RawMatrix};

#[test]
fn raw_prepared_weights_run_what_prepared_weights_run() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("raw_prepared_weights_run_what_prepared_weights_run");
    let stream = g.stream.cu_stream() as *mut c_void;
    // (M, N, K, ld of W): aligned, odd K, strided W, a decoding size.
    for (i, &(m, n, k, ldw)) in
        [(512, 384, 256, 256), (300, 200, 131, 131), (129, 260, 96, 100), (1, 3072, 768, 768)].iter().enumerate()
    {
        for precision in [Precision::Tf32, Precision::Tf32Truncated, Precision::Tf32x3] {
            let gemm = g.gemm.with_precision(precision);
            let what = format!("{m}×{n}×{k} (ld {ldw}), {precision:?}");
            let x = g.stream.clone_htod(&common::fill(m * k, &mut rng, |r| r.unit())).expect("x");
            let w = g.stream.clone_htod(&common::fill(n * ldw, &mut rng, |r| r.sym(0.08))).expect("w");
            let b = g.stream.clone_htod(&common::fill(n, &mut rng, |r| r.sym(0.08))).expect("b");
            let w_view = MatrixRef::with_ld(w.slice(0..n * ldw), n, k, ldw);
            let safe = gemm.prepare_weight(&g.stream, &w_view).expect("prepare_weight");

            let len = gemm.prepared_weight_len(n, k).expect("len");
            assert_eq!(len, n * safe.ld() * if safe.is_split() { 2 } else { 1 }, "{what}");
            let mut dst: CudaSlice<f32> = g.stream.clone_htod(&common::poisoned(len)).expect("dst");
            let (wp, _gw) = w.device_ptr(&g.stream);
            let (dp, _gd) = dst.device_ptr_mut(&g.stream);
            let raw_w = RawMatrix { ptr: wp, rows: n, cols: k, ld: ldw, len: n * ldw };
            // SAFETY: live allocations of this context, used on g.stream only.
            let prepared = unsafe { gemm.prepare_weight_raw(stream, raw_w, RawBuffer { ptr: dp, len }) }.expect("raw");
            assert_eq!(
                (prepared.rows(), prepared.cols(), prepared.ld(), prepared.len(), prepared.precision()),
                (n, k, safe.ld(), len, precision),
                "{what}"
            );
            assert_eq!(prepared.is_split(), safe.is_split(), "{what}");
            // SAFETY: dp is where prepare_weight_raw of this handle wrote.
            let described = unsafe { gemm.raw_prepared_weight(dp, n, k) }.expect("described");
            assert_eq!(described, prepared, "{what}: described from its address");

            let ws_len = gemm.max_workspace_len(m, n, k).expect("bound");
            let mut ws = g.stream.alloc_zeros::<f32>(ws_len.max(1)).expect("ws");
            let mut want = g.stream.alloc_zeros::<f32>(m * n).expect("want");
            let plan = gemm
                .run_with_workspace(
                    &g.stream,
                    &MatrixRef::from_slice(&x, m, k),
                    &safe,
                    Some(&b.as_view()),
                    if i % 2 == 0 { 0.5 } else { -1.5 },
                    &mut MatrixMut::from_slice(&mut want, m, n),
                    &mut ws.as_view_mut(),
                )
                .expect("run")
                .expect("non-empty");
            let mut got = g.stream.clone_htod(&common::poisoned(m * n)).expect("got");
            let (xp, _gx) = x.device_ptr(&g.stream);
            let (bp, _gb) = b.device_ptr(&g.stream);
            let (op, _go) = got.device_ptr_mut(&g.stream);
            let (wsp, _gws) = ws.device_ptr_mut(&g.stream);
            let x_view = MatrixRef::from_slice(&x, m, k);
            assert_eq!(
                gemm.workspace_len_raw_prepared(RawMatrix::dense(xp, m, k), &prepared).expect("raw len"),
                gemm.workspace_len(&g.stream, &x_view, &safe).expect("len"),
                "{what}: the raw sizing is the safe one"
            );
            assert_eq!(
                gemm.workspace_len_raw(RawMatrix::dense(xp, m, k), raw_w).expect("raw len"),
                gemm.workspace_len(&g.stream, &x_view, &w_view).expect("len"),
                "{what}"
            );
            // SAFETY: as above; `prepared` describes `dst`, written above on the same stream.
            let ran = unsafe {
                gemm.run_raw_prepared(
                    stream,
                    RawMatrix::dense(xp, m, k),
                    &prepared,
                    Some(RawBuffer { ptr: bp, len: n }),
                    if i % 2 == 0 { 0.5 } else { -1.5 },
                    RawMatrix::dense(op, m, n),
                    Some(RawBuffer { ptr: wsp, len: ws_len }),
                )
            }
            .expect("run_raw_prepared")
            .expect("non-empty");
            assert_eq!(ran, plan, "{what}: the same plan as the safe call");
            g.stream.synchronize().expect("sync");
            drop((_go, _gws, _gd));
            let (got_h, want_h) = (g.stream.clone_dtoh(&got).expect("dl"), g.stream.clone_dtoh(&want).expect("dl"));
            common::assert_bitwise(&got_h, &want_h, n, &format!("{what}: run_raw_prepared against run"));
        }
    }
}

#[test]
fn raw_prepared_weights_refuse_bad_buffers_and_other_precisions() {
    let Some(g) = common::gpu() else { return };
    let mut rng = common::rng("raw_prepared_weights_refuse_bad_buffers_and_other_precisions");
    let stream = g.stream.cu_stream() as *mut c_void;
    let (m, n, k) = (64, 128, 100);
    let x = g.stream.clone_htod(&common::fill(m * k, &mut rng, |r| r.unit())).expect("x");
    let w = g.stream.clone_htod(&common::fill(n * k, &mut rng, |r| r.sym(0.08))).expect("w");
    let len = g.gemm.prepared_weight_len(n, k).expect("len");
    let mut dst = g.stream.clone_htod(&common::poisoned(len + 8)).expect("dst");
    let mut out = g.stream.clone_htod(&common::poisoned(m * n)).expect("out");
    let (wp, _gw) = w.device_ptr(&g.stream);
    let (xp, _gx) = x.device_ptr(&g.stream);
    let (dp, _gd) = dst.device_ptr_mut(&g.stream);
    let (op, _go) = out.device_ptr_mut(&g.stream);
    let raw_w = RawMatrix::dense(wp, n, k);
    // SAFETY (every call below): live allocations of this context, used on g.stream only.
    let prepare = |w: RawMatrix, d: RawBuffer| unsafe { g.gemm.prepare_weight_raw(stream, w, d) };
    assert!(matches!(
        prepare(raw_w, RawBuffer { ptr: dp + 4, len }),
        Err(Error::MisalignedPreparedWeight { address }) if address == dp + 4
    ));
    assert!(matches!(
        prepare(raw_w, RawBuffer { ptr: dp, len: len - 1 }),
        Err(Error::BufferTooSmall { operand: Operand::PreparedWeight, needed, .. }) if needed == len
    ));
    // A length the allocation does not have (64 MiB past it: past any allocation granularity).
    assert!(matches!(
        prepare(raw_w, RawBuffer { ptr: dp, len: len + (1 << 24) }),
        Err(Error::BufferTooSmall { operand: Operand::PreparedWeight, .. })
    ));
    // W's own memory as the destination.
    let big_w = g.stream.clone_htod(&vec![0.0f32; 2 * len]).expect("w");
    let (bwp, _gbw) = big_w.device_ptr(&g.stream);
    assert!(matches!(
        prepare(RawMatrix::dense(bwp, n, k), RawBuffer { ptr: bwp, len: 2 * len }),
        Err(Error::Overlapping { operand: Operand::PreparedWeight, with: Operand::W })
    ));
    assert!(matches!(
        prepare(RawMatrix { ld: k - 1, ..raw_w }, RawBuffer { ptr: dp, len }),
        Err(Error::LeadingDimension { operand: Operand::W, .. })
    ));
    let prepared = prepare(raw_w, RawBuffer { ptr: dp, len }).expect("prepare");
    // A descriptor is made only of memory that holds it: here a weight of twice the K.
    // SAFETY: describing reads nothing.
    let described = unsafe { g.gemm.raw_prepared_weight(dp, n, 2 * k) };
    assert!(
        matches!(described, Err(Error::BufferTooSmall { operand: Operand::PreparedWeight, needed, .. }) if needed > len + 8),
        "{described:?}"
    );
    // A handle of another precision refuses it, and writes nothing.
    let truncating = g.gemm.with_precision(Precision::Tf32Truncated);
    // SAFETY: as above.
    let refused = unsafe {
        truncating.run_raw_prepared(
            stream,
            RawMatrix::dense(xp, m, k),
            &prepared,
            None,
            0.5,
            RawMatrix::dense(op, m, n),
            None,
        )
    };
    assert!(matches!(
        refused,
        Err(Error::PreparedForOtherPrecision { prepared: Precision::Tf32, asked: Precision::Tf32Truncated })
    ));
    // An output that overlaps the prepared weight.
    // SAFETY: as above.
    let overlapping = unsafe {
        g.gemm.run_raw_prepared(
            stream,
            RawMatrix::dense(xp, m, k),
            &prepared,
            None,
            0.5,
            RawMatrix::dense(dp, m, n),
            None,
        )
    };
    assert!(matches!(overlapping, Err(Error::Overlapping { operand: Operand::Out, with: Operand::W })));
    g.stream.synchronize().expect("sync");
    drop(_go);
    let out_h = g.stream.clone_dtoh(&out).expect("dl");
    assert!(out_h.iter().all(|v| v.to_bits() == common::poison().to_bits()), "a refused call writes nothing");
}
