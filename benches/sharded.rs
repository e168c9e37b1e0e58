//! Two GPUs against one (issue 18): [`ShardedLinear`] over devices 0 and 1 against [`Linear`]
//! on device 0, on the reference shape 16384×4096×4096 and on 16384×16384×8192 (M×N×K).
//!
//! Variants, all `Precision::Tf32` (round to nearest), each timed as a whole forward (its output
//! allocated on the stream, as `forward` does):
//! - `1 GPU`: `Linear::forward` on device 0 (the full W);
//! - `2 GPUs, sharded`: `ShardedLinear::forward`, each device's column block of the output;
//! - `1 GPU, one shard`: device 0's shard (N/2 columns) alone on device 0: the time each device
//!   would take in `2 GPUs, sharded` if the two did not slow each other;
//! - `2 GPUs, gathered, c chunks, r SMs`: `ShardedLinear::forward_gathered`, the full output on
//!   both devices, the gather of each row chunk overlapping the next chunk's GEMM (c = 1: none),
//!   that GEMM leaving r SMs free for the gather and the block copies (`with_comm_sms`). The
//!   report names the engine NCCL gathered with.
//!
//! A sample is `reps` back-to-back calls of one variant, then every device synchronised, timed on
//! the host (calls of ≥ 1 ms, so launch costs are noise); rounds interleave the variants (each
//! round starts with the next one); medians. Speed-up = 1-GPU time / time; efficiency =
//! speed-up / 2. Before timing, one call of each variant is checked against the f64 reference on
//! sampled elements (‖e‖/‖ref‖ and max |e|/|ref| in the table).
//!
//! Run: `cargo bench --features nccl --bench sharded [-- FILTER]` with ids `sharded/reference`
//! and `sharded/wide`; needs two devices and NCCL (`libnccl.so` on the library path, README).
//! `GEMM_EPILOGUE_ROUNDS` (default 9), `GEMM_EPILOGUE_SHARDED_GATHERED` (the gathered variants,
//! `chunks:sms,…`); NCCL's own variables (e.g. `NCCL_MAX_CTAS`) reach its communicators. Report: printed, and written to
//! `$GEMM_EPILOGUE_BENCH_OUT` (default `target/sharded.md`). Without two devices or NCCL it prints
//! `skipped:` and exits 0 (1 with `GEMM_EPILOGUE_REQUIRE_GPU=1`).

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use gemm_epilogue::cudarc::driver::{CudaSlice, CudaStream};
use gemm_epilogue::testbed::reference::{element, HostMatrix, SplitMix64};
use gemm_epilogue::{device_streams, nccl_library_present, FusedGemm, Linear, Precision, ShardedLinear};

const SCALE: f32 = 0.5;
const SHAPES: [(&str, usize, usize, usize); 2] = [("reference", 16384, 4096, 4096), ("wide", 16384, 16384, 8192)];
/// Host time per sample, at least.
const SAMPLE_MS: f64 = 60.0;
const CHECKED: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    One,
    /// Device 0's shard alone, on device 0: what each device does in `Sharded`, without the other.
    OneShard,
    Sharded,
    Gathered {
        chunks: usize,
        comm_sms: u32,
    },
}

/// The gathered variants: (chunks, SMs left free); `GEMM_EPILOGUE_SHARDED_GATHERED` =
/// `"c:r,c:r,…"` replaces them.
const GATHERED: [(usize, u32); 7] = [(1, 24), (4, 24), (8, 24), (16, 24), (8, 0), (8, 12), (8, 36)];

fn gathered() -> Vec<(usize, u32)> {
    let parse = |v: String| -> Option<Vec<(usize, u32)>> {
        v.split(',')
            .map(|p| p.split_once(':').and_then(|(c, r)| Some((c.trim().parse().ok()?, r.trim().parse().ok()?))))
            .collect()
    };
    std::env::var("GEMM_EPILOGUE_SHARDED_GATHERED").ok().and_then(parse).unwrap_or_else(|| GATHERED.to_vec())
}

impl Variant {
    fn name(self, layer: &ShardedLinear) -> String {
        match self {
            Variant::One => "1 GPU (`Linear::forward`)".into(),
            Variant::OneShard => "1 GPU, one shard (N/2) alone".into(),
            Variant::Sharded => "2 GPUs, sharded output (`forward`)".into(),
            Variant::Gathered { chunks, comm_sms } => {
                let engine = layer.gather_engine().map_or("?".into(), |e| format!("{e:?}"));
                let plural = if chunks == 1 { "" } else { "s" };
                format!("2 GPUs, gathered output (`forward_gathered`), {chunks} chunk{plural}, NCCL on {engine}, {comm_sms} SMs left free")
            }
        }
    }
}

struct Shape {
    n: usize,
    k: usize,
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
}

struct Setup {
    streams: Vec<Arc<CudaStream>>,
    one: Linear,
    one_shard: Linear,
    x0: CudaSlice<f32>,
    two: ShardedLinear,
    xs: Vec<CudaSlice<f32>>,
}

impl Setup {
    fn new(streams: &[Arc<CudaStream>], s: &Shape) -> Self {
        let s0 = &streams[0];
        let gemm = FusedGemm::new(s0.context()).expect("kernels");
        let one =
            Linear::new(gemm, s0.clone_htod(&s.w).expect("w"), Some(s0.clone_htod(&s.b).expect("b")), s.k, s.n, SCALE)
                .expect("Linear");
        let x0 = s0.clone_htod(&s.x).expect("x");
        let two = ShardedLinear::from_host(streams, Precision::Tf32, &s.w, Some(&s.b), s.k, s.n, SCALE)
            .expect("ShardedLinear");
        let cols = two.columns(0).expect("shard 0");
        let one_shard = Linear::new(
            FusedGemm::new(s0.context()).expect("kernels"),
            s0.clone_htod(&s.w[cols.start * s.k..cols.end * s.k]).expect("w rows"),
            Some(s0.clone_htod(&s.b[cols.clone()]).expect("b rows")),
            s.k,
            cols.len(),
            SCALE,
        )
        .expect("Linear");
        let xs = two.replicate(&x0).expect("replicate");
        Self { streams: streams.to_vec(), one, one_shard, x0, two, xs }
    }

    /// One call; the output as the host sees it (`rows × n`, assembled from the shards).
    fn call(&mut self, v: Variant, m: usize) -> Output {
        match v {
            Variant::One => Output::Full(self.one.forward(&self.x0, m).expect("forward").expect("rows")),
            Variant::OneShard => Output::Shards(vec![self.one_shard.forward(&self.x0, m).expect("forward"), None]),
            Variant::Sharded => Output::Shards(self.two.forward(&self.xs, m).expect("forward")),
            Variant::Gathered { chunks, comm_sms } => {
                self.two.set_gather_chunks(chunks);
                self.two.set_comm_sms(comm_sms);
                Output::Gathered(self.two.forward_gathered(&self.xs, m).expect("gathered"))
            }
        }
    }

    fn sync(&self) {
        for s in &self.streams {
            s.synchronize().expect("sync");
        }
    }
}

enum Output {
    Full(CudaSlice<f32>),
    Shards(Vec<Option<CudaSlice<f32>>>),
    Gathered(Vec<CudaSlice<f32>>),
}

impl Output {
    /// Element (r, c) of the full output, for the sampled checks (device 0's copy; a sharded
    /// output from the shard that owns column c).
    fn elements(&self, two: &ShardedLinear, n: usize, at: &[(usize, usize)]) -> Vec<f32> {
        let dl = |s: &CudaSlice<f32>| s.stream().clone_dtoh(s).expect("download");
        match self {
            Output::Full(o) => {
                let h = dl(o);
                at.iter().map(|&(r, c)| h[r * n + c]).collect()
            }
            Output::Gathered(o) => {
                let h = dl(&o[1]); // the copy that went through NCCL on a 2-device layer
                at.iter().map(|&(r, c)| h[r * n + c]).collect()
            }
            Output::Shards(parts) => {
                let hosts: Vec<Option<Vec<f32>>> = parts.iter().map(|p| p.as_ref().map(dl)).collect();
                at.iter()
                    .map(|&(r, c)| {
                        let g = (0..two.devices())
                            .find(|&g| two.columns(g).is_some_and(|cols| cols.contains(&c)))
                            .expect("owner");
                        let cols = two.columns(g).expect("cols");
                        hosts[g].as_ref().expect("shard")[r * cols.len() + (c - cols.start)]
                    })
                    .collect()
            }
        }
    }
}

fn main() {
    let args = common::args::parse();
    let selected: Vec<_> = SHAPES.iter().filter(|s| args.selects(&format!("sharded/{}", s.0))).collect();
    if args.list {
        for s in &SHAPES {
            println!("sharded/{}: bench", s.0);
        }
        return;
    }
    if selected.is_empty() {
        println!("sharded: no benchmark id matches the filter {:?}", args.filter);
        return;
    }
    if !nccl_library_present() {
        return common::skip_or_fail("NCCL (libnccl.so) does not load".into());
    }
    let streams = match device_streams(2) {
        Ok(s) => s,
        Err(e) => return common::skip_or_fail(format!("two devices: {e}")),
    };
    let rounds: usize = std::env::var("GEMM_EPILOGUE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(9);
    let rounds = if args.bench_mode { rounds } else { 1 };
    let device = format!("2 × {}", streams[0].context().name().unwrap_or_else(|_| "unknown".into()));
    let _ = std::fs::create_dir_all("target");
    let mut report = common::run_info::header("Two GPUs against one: ShardedLinear (issue 18)", &device);
    let mut rng = SplitMix64::new(0x5eed_0018);
    for &&(_, m, n, k) in &selected {
        let a = 1.0 / (k as f32).sqrt();
        let fill = |len: usize, rng: &mut SplitMix64, amp: f32| (0..len).map(|_| rng.sym(amp)).collect::<Vec<f32>>();
        let shape = Shape { n, k, x: fill(m * k, &mut rng, 1.0), w: fill(n * k, &mut rng, a), b: fill(n, &mut rng, a) };
        let mut setup = Setup::new(&streams, &shape);
        let mut variants = vec![Variant::One, Variant::OneShard, Variant::Sharded];
        variants.extend(gathered().into_iter().map(|(chunks, comm_sms)| Variant::Gathered { chunks, comm_sms }));

        // Accuracy on sampled elements, one call of each variant.
        let at: Vec<(usize, usize)> = (0..CHECKED).map(|_| (rng.below(m), rng.below(n))).collect();
        let (x, w) = (HostMatrix::new(&shape.x, m, k), HostMatrix::new(&shape.w, n, k));
        let want: Vec<f64> = at.iter().map(|&(r, c)| element(x, w, Some(&shape.b), SCALE, r, c).value).collect();
        let mut errors = Vec::new();
        for &v in &variants {
            if v == Variant::OneShard {
                errors.push((f64::NAN, f64::NAN)); // shard 0's columns only: not the full output
                drop(setup.call(v, m));
                continue;
            }
            let out = setup.call(v, m);
            let got = out.elements(&setup.two, n, &at);
            let (e2, r2, max) = got.iter().zip(&want).fold((0.0, 0.0, 0.0f64), |(e2, r2, max), (&g, &w)| {
                let e = g as f64 - w;
                (e2 + e * e, r2 + w * w, max.max(e.abs() / w.abs().max(1e-30)))
            });
            errors.push(((e2 / r2).sqrt(), max));
        }

        // Calls per sample, from one timed call of the 1-GPU variant.
        setup.sync();
        let t = Instant::now();
        drop(setup.call(Variant::One, m));
        setup.sync();
        let reps = ((SAMPLE_MS / (t.elapsed().as_secs_f64() * 1e3)).ceil() as usize).clamp(2, 200);
        let mut samples = vec![Vec::new(); variants.len()];
        for round in 0..rounds {
            for i in 0..variants.len() {
                let j = (round + i) % variants.len();
                setup.sync();
                let t = Instant::now();
                for _ in 0..reps {
                    drop(setup.call(variants[j], m));
                }
                setup.sync();
                samples[j].push(t.elapsed().as_secs_f64() * 1e3 / reps as f64);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let medians: Vec<f64> = samples.iter_mut().map(median).collect();
        let flops = 2.0 * (m * n * k) as f64;
        report += &format!(
            "\n### {m}×{n}×{k} (M×N×K), s = {SCALE}, `Precision::Tf32` (operands rounded to nearest TF32) everywhere; {rounds} interleaved rounds of {reps} calls; error on {CHECKED} sampled elements vs f64\n\n\
             | variant | median ms | TFLOP/s (all GPUs) | speed-up vs 1 GPU | efficiency (/2) | ‖e‖/‖ref‖ | max \\|e\\|/\\|ref\\| |\n|---|---:|---:|---:|---:|---:|---:|\n"
        );
        for (i, v) in variants.iter().enumerate() {
            let speedup = medians[0] / medians[i];
            let (eff, flops) = match v {
                Variant::One => ("–".to_string(), flops),
                Variant::OneShard => {
                    ("–".to_string(), flops * setup.two.columns(0).expect("shard").len() as f64 / n as f64)
                }
                _ => (format!("{:.3}", speedup / 2.0), flops),
            };
            let err = |e: f64| if e.is_nan() { "–".to_string() } else { format!("{e:.2e}") };
            report += &format!(
                "| {} | {:.4} | {:.1} | {:.3} | {eff} | {} | {} |\n",
                v.name(&setup.two),
                medians[i],
                flops / medians[i] / 1e9,
                speedup,
                err(errors[i].0),
                err(errors[i].1)
            );
        }
        println!("{report}");
    }
    if args.bench_mode {
        let path = std::env::var("GEMM_EPILOGUE_BENCH_OUT").unwrap_or_else(|_| "target/sharded.md".into());
        if let Err(e) = std::fs::write(&path, &report) {
            eprintln!("sharded: cannot write {path}: {e}");
        }
    }
}
