//! The column-parallel layer (feature `nccl`): each shard is bitwise the single-GPU call on its
//! rows of W, the gathered output holds every shard in its columns on every device (the same
//! bits everywhere) and meets the f64 bound, the three constructors agree bitwise, uneven and
//! empty shards work, and bad arguments are refused. G = 1 always runs (the same code path); G =
//! 2 where a second device exists.
//!
//! Skips (prints `skipped:`) without a GPU, without NCCL, and G = 2 without a second device;
//! `GEMM_EPILOGUE_REQUIRE_NCCL=1` and `GEMM_EPILOGUE_REQUIRE_DEVICES=2` turn those into failures.

mod common;

use std::sync::Arc;

use gemm_epilogue::cudarc::driver::{CudaSlice, CudaStream};
use gemm_epilogue::testbed::reference::{element, HostMatrix};
use gemm_epilogue::{
    cuda_context, device_streams, nccl_library_present, Error, FusedGemm, GatherEngine, Linear, Precision,
    ShardedLinear,
};

fn required(var: &str, at_least: usize) -> bool {
    std::env::var(var).ok().and_then(|v| v.trim().parse::<usize>().ok()).is_some_and(|v| v >= at_least)
}

/// Streams on devices 0..devices, or `None` after printing why not.
fn streams(devices: usize) -> Option<Vec<Arc<CudaStream>>> {
    common::gpu()?;
    if !nccl_library_present() {
        assert!(
            !required("GEMM_EPILOGUE_REQUIRE_NCCL", 1),
            "GEMM_EPILOGUE_REQUIRE_NCCL=1 but libnccl.so does not load"
        );
        println!("skipped: NCCL (libnccl.so) does not load");
        return None;
    }
    match device_streams(devices) {
        Ok(s) => Some(s),
        Err(e @ Error::NoDevice { .. }) => {
            assert!(!required("GEMM_EPILOGUE_REQUIRE_DEVICES", devices), "GEMM_EPILOGUE_REQUIRE_DEVICES: {e}");
            println!("skipped: {devices} devices: {e}");
            None
        }
        Err(e) => panic!("device_streams({devices}): {e}"),
    }
}

fn host(s: &CudaSlice<f32>) -> Vec<f32> {
    s.stream().clone_dtoh(s).expect("download")
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A layer on the host: W (n × k), b (n), x (rows × k).
struct HostLayer {
    rows: usize,
    k: usize,
    n: usize,
    w: Vec<f32>,
    b: Vec<f32>,
    x: Vec<f32>,
}

impl HostLayer {
    fn random(rows: usize, k: usize, n: usize, rng: &mut common::Rng) -> Self {
        let a = 1.0 / (k as f32).sqrt();
        Self {
            rows,
            k,
            n,
            w: common::fill(n * k, rng, |r| r.sym(a)),
            b: common::fill(n, rng, |r| r.sym(a)),
            x: common::fill(rows * k, rng, |r| r.sym(1.0)),
        }
    }

    /// Every element of the full output against f64: the per-element bound of rounded TF32
    /// operands and the normalised error (tests/common/bounds.rs).
    fn check(&self, out: &[f32], scale: f32, what: &str) {
        assert_eq!(out.len(), self.rows * self.n, "{what}: length");
        let (x, w) = (HostMatrix::new(&self.x, self.rows, self.k), HostMatrix::new(&self.w, self.n, self.k));
        let c = common::coeff(2f64.powi(-11), self.k);
        let (mut e2, mut r2) = (0.0f64, 0.0f64);
        for row in 0..self.rows {
            for col in 0..self.n {
                let want = element(x, w, Some(&self.b), scale, row, col);
                let got = out[row * self.n + col] as f64;
                let e = (got - want.value).abs();
                assert!(
                    e <= c * want.magnitude + common::ABS_SLACK,
                    "{what}: ({row}, {col}) = {got}, f64 {} (bound {})",
                    want.value,
                    c * want.magnitude
                );
                e2 += e * e;
                r2 += want.value * want.value;
            }
        }
        if self.k >= 16 && self.rows * self.n >= common::MIN_NORM_COUNT {
            assert!((e2 / r2).sqrt() <= common::NORM_TOL, "{what}: ‖e‖/‖ref‖ = {}", (e2 / r2).sqrt());
        }
    }
}

const SCALE: f32 = 0.5;

/// G devices: forward, forward_gathered (one chunk and several), replicate, against the
/// single-GPU layer on each shard (bitwise) and f64.
fn shards_gather_and_replicate(devices: usize) {
    let Some(streams) = streams(devices) else { return };
    let mut rng = common::rng(&format!("shards_gather_and_replicate_{devices}"));
    // K % 4 != 0 (the repack, through each shard's held workspace), N not a multiple of the
    // devices or of any tile, and N < devices where there are several.
    for (rows, k, n) in [(1100, 260, 1000), (700, 1027, 7), (1030, 96, 1)] {
        let l = HostLayer::random(rows, k, n, &mut rng);
        let what = format!("G = {devices}, {rows}×{n}×{k}");
        let layer =
            ShardedLinear::from_host(&streams, Precision::Tf32, &l.w, Some(&l.b), k, n, SCALE).expect("from_host");
        assert_eq!(layer.devices(), devices);
        let x0 = streams[0].clone_htod(&l.x).expect("x");
        let xs = layer.replicate(&x0).expect("replicate");
        for (g, x) in xs.iter().enumerate() {
            assert_eq!(bits(&host(x)), bits(&l.x), "{what}: replica {g}");
        }
        let shards = layer.forward(&xs, rows).expect("forward");
        for (g, shard) in shards.iter().enumerate() {
            let cols = layer.columns(g).expect("columns");
            let Some(shard) = shard else {
                assert!(cols.is_empty(), "{what}: shard {g} missing");
                continue;
            };
            // The single-GPU call on the same rows of W, on device 0.
            let gemm = FusedGemm::new(streams[0].context()).expect("gemm");
            let w = streams[0].clone_htod(&l.w[cols.start * k..cols.end * k]).expect("w rows");
            let b = streams[0].clone_htod(&l.b[cols.clone()]).expect("b rows");
            let single = Linear::new(gemm, w, Some(b), k, cols.len(), SCALE).expect("Linear");
            let want = single.forward(&x0, rows).expect("single").expect("non-empty");
            assert_eq!(bits(&host(shard)), bits(&host(&want)), "{what}: shard {g} is the single-GPU call");
        }
        for chunks in [1, 3] {
            let layer = ShardedLinear::from_host(&streams, Precision::Tf32, &l.w, Some(&l.b), k, n, SCALE)
                .expect("from_host")
                .with_gather_chunks(chunks);
            let full = layer.forward_gathered(&xs, rows).expect("gathered");
            let first = host(&full[0]);
            l.check(&first, SCALE, &format!("{what}, gathered in {chunks} chunk(s)"));
            for (g, out) in full.iter().enumerate().skip(1) {
                assert_eq!(bits(&host(out)), bits(&first), "{what}: device {g} holds device 0's bits");
            }
            if chunks == 1 {
                for (g, shard) in shards.iter().enumerate() {
                    let (Some(shard), cols) = (shard, layer.columns(g).expect("columns")) else { continue };
                    let shard = host(shard);
                    for r in 0..rows {
                        assert_eq!(
                            bits(&first[r * n + cols.start..r * n + cols.end]),
                            bits(&shard[r * cols.len()..(r + 1) * cols.len()]),
                            "{what}: row {r} of shard {g}"
                        );
                    }
                }
            }
        }
        // Zero rows cannot come with an input buffer (the driver allocates none of 0 bytes):
        // a length that is not rows · K is refused.
        assert!(matches!(layer.forward_gathered(&xs, 0), Err(Error::ShapeMismatch { .. })));
    }
}

#[test]
fn one_device_takes_the_same_path() {
    shards_gather_and_replicate(1);
}

#[test]
fn two_devices() {
    shards_gather_and_replicate(2);
}

/// One layer, gathered batch after batch: its buffers grow (the old windows are released and new
/// ones registered), are reused, and the SM override is honoured; every output meets the f64
/// bound and is the same on every device. The engine NCCL used is reported, and must be the copy
/// engines where `GEMM_EPILOGUE_REQUIRE_COPY_ENGINE_GATHER=1` says the machine allows them.
#[test]
fn gather_buffers_grow_and_are_reused() {
    let devices = if streams(2).is_some() { 2 } else { 1 };
    let Some(streams) = streams(devices) else { return };
    let mut rng = common::rng("gather_buffers_grow_and_are_reused");
    let (k, n) = (136, 515);
    let base = HostLayer::random(1, k, n, &mut rng);
    let mut layer = ShardedLinear::from_host(&streams, Precision::Tf32, &base.w, Some(&base.b), k, n, SCALE)
        .expect("from_host")
        .with_gather_chunks(3);
    assert_eq!(layer.gather_engine(), None, "no gather yet");
    for (rows, sms) in [(600, 24), (1700, 24), (600, 24), (1700, 100), (90, 0)] {
        layer.set_comm_sms(sms);
        // Fresh inputs through the same layer.
        let l = HostLayer {
            rows,
            x: common::fill(rows * k, &mut rng, |r| r.sym(1.0)),
            w: base.w.clone(),
            b: base.b.clone(),
            k,
            n,
        };
        let xs: Vec<_> = streams.iter().map(|s| s.clone_htod(&l.x).expect("x")).collect();
        let full = layer.forward_gathered(&xs, rows).expect("gathered");
        let first = host(&full[0]);
        let what = format!("G = {devices}, {rows} rows, comm_sms {sms}");
        l.check(&first, SCALE, &what);
        for (g, out) in full.iter().enumerate().skip(1) {
            assert_eq!(bits(&host(out)), bits(&first), "{what}: device {g} holds device 0's bits");
        }
    }
    let engine = layer.gather_engine().expect("an engine after a gather");
    println!("G = {devices}: NCCL gathered on {engine:?}");
    if devices > 1 && required("GEMM_EPILOGUE_REQUIRE_COPY_ENGINE_GATHER", 1) {
        assert_eq!(engine, GatherEngine::CopyEngines, "GEMM_EPILOGUE_REQUIRE_COPY_ENGINE_GATHER=1");
    }
}

/// from_host, from_linear (W sent from one device with NCCL) and from_shards give the same bits.
#[test]
fn the_constructors_agree() {
    let devices = if streams(2).is_some() { 2 } else { 1 };
    let Some(streams) = streams(devices) else { return };
    let mut rng = common::rng("the_constructors_agree");
    let l = HostLayer::random(513, 200, 301, &mut rng);
    let (k, n) = (l.k, l.n);
    let a = ShardedLinear::from_host(&streams, Precision::Tf32, &l.w, Some(&l.b), k, n, SCALE).expect("from_host");
    let root = streams.len() - 1; // the last device holds the full layer
    let full = Linear::new(
        FusedGemm::new(streams[root].context()).expect("gemm"),
        streams[root].clone_htod(&l.w).expect("w"),
        Some(streams[root].clone_htod(&l.b).expect("b")),
        k,
        n,
        SCALE,
    )
    .expect("Linear");
    let b = ShardedLinear::from_linear(&streams, &full).expect("from_linear");
    drop(full);
    let parts = (0..devices)
        .map(|g| {
            let cols = a.columns(g).expect("columns");
            let s = &streams[g];
            Linear::new(
                FusedGemm::new(s.context()).expect("gemm"),
                s.clone_htod(&l.w[cols.start * k..cols.end * k]).expect("w"),
                Some(s.clone_htod(&l.b[cols]).expect("b")),
                k,
                a.columns(g).unwrap().len(),
                SCALE,
            )
            .expect("shard")
        })
        .collect();
    let c = ShardedLinear::from_shards(&streams, parts).expect("from_shards");
    let xs: Vec<_> = streams.iter().map(|s| s.clone_htod(&l.x).expect("x")).collect();
    let outs: Vec<Vec<u32>> = [&a, &b, &c]
        .iter()
        .map(|layer| bits(&host(&layer.forward_gathered(&xs, l.rows).expect("gathered")[0])))
        .collect();
    assert_eq!(outs[0], outs[1], "from_linear vs from_host");
    assert_eq!(outs[0], outs[2], "from_shards vs from_host");
    l.check(&f32::from_bits_vec(&outs[0]), SCALE, "constructors");
}

trait FromBits {
    fn from_bits_vec(v: &[u32]) -> Vec<f32>;
}
impl FromBits for f32 {
    fn from_bits_vec(v: &[u32]) -> Vec<f32> {
        v.iter().map(|&b| f32::from_bits(b)).collect()
    }
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let Some(streams) = streams(1) else { return };
    let s = &streams[0];
    let (k, n) = (64, 48);
    let w = vec![0.5f32; n * k];
    let twice = [s.clone(), s.context().new_stream().expect("stream")];
    let e = ShardedLinear::from_host(&twice, Precision::Tf32, &w, None, k, n, SCALE).unwrap_err();
    assert!(matches!(e, Error::InvalidDevices { .. }), "{e}");
    let e = ShardedLinear::from_host(&streams, Precision::Tf32, &w[1..], None, k, n, SCALE).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    let e = ShardedLinear::from_host(&streams, Precision::Tf32, &w, Some(&[1.0; 3]), k, n, SCALE).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    let e = ShardedLinear::from_shards(&streams, Vec::new()).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");

    let layer = ShardedLinear::from_host(&streams, Precision::Tf32, &w, None, k, n, SCALE).expect("layer");
    let x = s.clone_htod(&vec![1.0f32; 10 * k]).expect("x");
    let e = layer.forward(&[], 10).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    let e = layer.forward(std::slice::from_ref(&x), 11).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    let e = layer.forward_gathered(std::slice::from_ref(&x), usize::MAX).unwrap_err();
    assert!(matches!(e, Error::DimensionTooLarge { .. }), "{e}");
    // An input on another device than its shard's.
    if let Ok(other) = cuda_context(1) {
        let y = other.default_stream().clone_htod(&vec![1.0f32; 10 * k]).expect("y");
        let e = layer.forward(std::slice::from_ref(&y), 10).unwrap_err();
        assert!(matches!(e, Error::WrongContext { .. }), "{e}");
    }
    assert!(
        matches!(layer.forward(std::slice::from_ref(&x), 0), Err(Error::ShapeMismatch { .. })),
        "0 rows with a 10-row input"
    );
}
