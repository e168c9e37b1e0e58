//! The `mma.sync.aligned.m16n8k8` TF32 issue-rate ceiling of this GPU: how many TFLOP/s a kernel
//! built on the Ampere-style tensor-core path (the crate's `Sm80*` kernels) could reach at best.
//!
//! The microbenchmark kernel is hand-written PTX, JIT-compiled by the driver at run time (no nvcc,
//! no NVRTC): each warp runs 16 `mma.sync` per loop iteration on 8 independent accumulator chains,
//! from registers, with no memory traffic; the accumulators are summed and stored once so nothing
//! is dead code. 8 warps per block, 1 to 4 blocks per SM, CUDA-event timing, median of 7 launches.
//! One `m16n8k8` is 2·16·8·8 = 2048 FLOP per warp.
//!
//! Run: `cargo bench --bench mma_sync_ceiling` (`-- --print-ptx` prints the kernel and exits; a
//! filter that is not a substring of `mma_sync_ceiling` skips it, so that `.gpu/run bench
//! FILTER` runs only the bench it names). Without a GPU it prints `skipped: <reason>` and
//! exits 0, unless `GEMM_EPILOGUE_REQUIRE_GPU=1`, then it exits 1. Clocks under load vary (see
//! docs/BENCHMARKS.md): quote the result with the date and, if you can, the SM clock.

mod common;
use common::skip_or_fail;
use std::fmt::Write as _;

use gemm_epilogue::cuda_context;
use gemm_epilogue::cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use gemm_epilogue::cudarc::driver::{LaunchConfig, PushKernelArg};
use gemm_epilogue::cudarc::nvrtc::Ptx;

const CHAINS: usize = 8;
const UNROLL: usize = 2;
const WARPS_PER_BLOCK: u32 = 8;
const FLOP_PER_MMA: f64 = 2.0 * 16.0 * 8.0 * 8.0;

/// The PTX of `mma_sync_tf32_loop(float* out, u32 iters)`.
fn ptx() -> String {
    let mut s = String::new();
    let _ = writeln!(s, ".version 7.0\n.target sm_80\n.address_size 64\n");
    let _ = writeln!(s, ".visible .entry mma_sync_tf32_loop(.param .u64 out_ptr, .param .u32 iters)\n{{");
    let _ = writeln!(s, "  .reg .pred %p;\n  .reg .b32 %a<4>;\n  .reg .b32 %b<2>;\n  .reg .f32 %d<{}>;", 4 * CHAINS);
    let _ = writeln!(s, "  .reg .f32 %f<4>;\n  .reg .u32 %i, %n, %t, %c, %w, %g;\n  .reg .u64 %o, %off;");
    // Operands from the thread index so nothing is constant-folded; small values, no overflow.
    let _ = writeln!(s, "  mov.u32 %t, %tid.x;\n  cvt.rn.f32.u32 %f0, %t;\n  mul.f32 %f0, %f0, 0f3A800000;");
    let _ = writeln!(s, "  add.f32 %f1, %f0, 0f3F000000;\n  sub.f32 %f2, 0f3F000000, %f0;");
    for (i, f) in ["%f0", "%f1", "%f2", "%f1"].iter().enumerate() {
        let _ = writeln!(s, "  mov.b32 %a{i}, {f};");
    }
    let _ = writeln!(s, "  mov.b32 %b0, %f1;\n  mov.b32 %b1, %f2;");
    for d in 0..4 * CHAINS {
        let _ = writeln!(s, "  mov.f32 %d{d}, 0f00000000;");
    }
    let _ = writeln!(s, "  ld.param.u32 %n, [iters];\n  mov.u32 %i, 0;\nLOOP:");
    for _ in 0..UNROLL {
        for c in 0..CHAINS {
            let d = format!("{{%d{}, %d{}, %d{}, %d{}}}", 4 * c, 4 * c + 1, 4 * c + 2, 4 * c + 3);
            let _ = writeln!(
                s,
                "  mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {d}, {{%a0, %a1, %a2, %a3}}, {{%b0, %b1}}, {d};"
            );
        }
    }
    let _ = writeln!(s, "  add.u32 %i, %i, 1;\n  setp.lt.u32 %p, %i, %n;\n  @%p bra LOOP;");
    let _ = writeln!(s, "  mov.f32 %f3, 0f00000000;");
    for d in 0..4 * CHAINS {
        let _ = writeln!(s, "  add.f32 %f3, %f3, %d{d};");
    }
    let _ = writeln!(s, "  mov.u32 %c, %ctaid.x;\n  mov.u32 %w, %ntid.x;\n  mad.lo.u32 %g, %c, %w, %t;");
    let _ = writeln!(s, "  ld.param.u64 %o, [out_ptr];\n  cvta.to.global.u64 %o, %o;\n  mul.wide.u32 %off, %g, 4;");
    let _ = writeln!(s, "  add.u64 %o, %o, %off;\n  st.global.f32 [%o], %f3;\n  ret;\n}}");
    s
}

fn main() {
    if std::env::args().any(|a| a == "--print-ptx") {
        print!("{}", ptx());
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        println!("mma_sync_ceiling: benchmark");
        return;
    }
    // `.gpu/run bench FILTER` passes the filter to every bench: run only when it names this one.
    let args = common::args::parse();
    if !args.selects("mma_sync_ceiling") {
        println!("mma_sync_ceiling: not selected by the filter {:?}", args.filter);
        return;
    }
    let ctx = match cuda_context(0) {
        Ok(ctx) => ctx,
        Err(e) => return skip_or_fail(format!("no CUDA device: {e}")),
    };
    let (major, minor) = ctx.compute_capability().expect("compute capability");
    if major < 8 {
        return skip_or_fail(format!("device is sm_{major}{minor}; TF32 mma.sync needs sm_80+"));
    }
    let sms = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).expect("SM count") as u32;
    let module = ctx.load_module(Ptx::from_src(ptx())).expect("JIT-compiling the mma.sync PTX");
    let function = module.load_function("mma_sync_tf32_loop").expect("kernel entry");
    let stream = ctx.default_stream();
    let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
    println!("device: {name} (sm_{major}{minor}, {sms} SMs); {WARPS_PER_BLOCK} warps/block, {CHAINS} chains × {UNROLL} unrolled mma.sync per iteration");
    println!("| blocks/SM | warps/SM | iters | median ms | TFLOP/s |\n|---:|---:|---:|---:|---:|");
    // Test mode (`cargo test --benches`): one tiny launch only.
    let test_mode = !args.bench_mode;
    for blocks_per_sm in 1..=4u32 {
        let grid = sms * blocks_per_sm;
        let threads = WARPS_PER_BLOCK * 32;
        let iters: u32 = if test_mode { 4 } else { 8192 / blocks_per_sm };
        let mut out = stream.alloc_zeros::<f32>((grid * threads) as usize).expect("alloc");
        let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let launch = |out: &mut gemm_epilogue::cudarc::driver::CudaSlice<f32>| {
            let mut b = stream.launch_builder(&function);
            b.arg(out).arg(&iters);
            // SAFETY: the PTX entry takes (u64 pointer, u32); `out` holds grid × threads floats,
            // one per thread, which is exactly what the kernel writes.
            unsafe { b.launch(cfg) }.expect("launch");
        };
        launch(&mut out); // warm-up (and JIT of the first launch)
        let reps = if test_mode { 1 } else { 7 };
        let mut ms = Vec::with_capacity(reps);
        for _ in 0..reps {
            let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).expect("event");
            let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).expect("event");
            start.record(&stream).expect("record");
            launch(&mut out);
            end.record(&stream).expect("record");
            ms.push(start.elapsed_ms(&end).expect("elapsed") as f64);
        }
        ms.sort_by(|a, b| a.total_cmp(b));
        let median = ms[ms.len() / 2];
        let flop = grid as f64 * WARPS_PER_BLOCK as f64 * iters as f64 * (CHAINS * UNROLL) as f64 * FLOP_PER_MMA;
        println!(
            "| {blocks_per_sm} | {} | {iters} | {median:.3} | {:.1} |",
            blocks_per_sm * WARPS_PER_BLOCK,
            flop / (median * 1e-3) / 1e12
        );
    }
}
