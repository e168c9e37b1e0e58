//! Stream-K next to a kernel that holds most of the SMs (issue 15). An sm_90 stream-K finisher
//! waits for the clusters it shares a tile with that come before it in the schedule; they are
//! numbered by a ticket taken as each starts (csrc/sm90/warp_specialized.cuh), so a finisher only
//! ever waits for clusters that already hold an SM. Here a "hog" kernel on another stream holds
//! three quarters of the SMs (one block each, too much shared memory for a GEMM CTA beside it)
//! until a kernel queued *after* the GEMM on the GEMM's stream releases it: the GEMM must finish
//! on the quarter left, with its stream-K tiles, and give the bits of a solo run. A hog that
//! times out (10 s) means the GEMM did not finish beside it.

mod common;

use std::time::Duration;

use gemm_epilogue::cudarc::driver::sys::CUfunction_attribute;
use gemm_epilogue::cudarc::driver::{LaunchConfig, PushKernelArg};
use gemm_epilogue::cudarc::nvrtc::compile_ptx;
use gemm_epilogue::{Dispatch, Kernel, MatrixMut, MatrixRef, Precision};

const HOG: &str = r#"
extern "C" __global__ void hog(const volatile int *release, unsigned long long max_ns, int *timed_out) {
    extern __shared__ unsigned char hold[];
    if (threadIdx.x == 0) {
        unsigned long long t0, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do {
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        } while (*release == 0 && now - t0 < max_ns);
        if (*release == 0) atomicAdd(timed_out, 1);
        hold[0] = 1;
    }
}
extern "C" __global__ void release_hogs(int *release) {
    *release = 1;
    __threadfence_system();
}
"#;

/// Shared memory per hog block: more than half an SM's, so one block per SM and no GEMM CTA
/// (≥ 100 KiB) beside it.
const HOLD_BYTES: u32 = 150 * 1024;
const MAX_NS: u64 = 10_000_000_000;

#[test]
fn stream_k_finishes_beside_a_kernel_holding_most_sms() {
    let Some(g) = common::hopper_gpu("the sm_90 stream-K schedule") else { return };
    // SAFETY: the hog reads the release flag on its stream while the GEMM's stream writes it:
    // cudarc's per-buffer events would make the write wait for the read, i.e. for the hog,
    // which waits for the write. This test orders its streams itself (synchronize).
    unsafe { g.ctx.disable_event_tracking() };
    let module = g.ctx.load_module(compile_ptx(HOG).expect("nvrtc compiles the hog")).expect("load the hog");
    let hog = module.load_function("hog").expect("hog");
    let release = module.load_function("release_hogs").expect("release_hogs");
    hog.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, HOLD_BYTES as i32)
        .expect("hog smem");
    let sms = g.gemm.device().sm_count;
    let held = sms - sms / 4;
    let hog_stream = g.ctx.new_stream().expect("stream");
    let mut rng = common::rng("stream_k_finishes_beside_a_kernel_holding_most_sms");
    let truncating = g.gemm.with_precision(Precision::Tf32Truncated);

    // The cluster kernel (a 34-tile shared tail on the reference shape), the ping-pong (136), and
    // split-K (32 tiles of 64×128, every one shared along K).
    for (kernel, (m, n, k)) in [
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, (16384, 4096, 4096)),
        (Kernel::Sm90Pingpong128x128SmemA, (16384, 4096, 4096)),
        (Kernel::Sm90Pingpong64x128SmemA, (64, 4096, 4096)),
    ] {
        let gemm = truncating.with_dispatch(Dispatch::Force(kernel));
        let up = |v: Vec<f32>| g.stream.clone_htod(&v).expect("upload");
        let a = 1.0 / (k as f32).sqrt();
        let x = up(common::fill(m * k, &mut rng, |r| r.unit()));
        let w = up(common::fill(n * k, &mut rng, |r| r.sym(a)));
        let b = up(common::fill(n, &mut rng, |r| r.sym(a)));
        let (xv, wv) = (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k));
        let len = gemm.workspace_len(&g.stream, &xv, &wv).expect("workspace_len");
        let mut ws = g.stream.alloc_zeros::<f32>(len.max(1)).expect("workspace");
        let mut call = |out: &mut gemm_epilogue::cudarc::driver::CudaSlice<f32>| {
            gemm.run_with_workspace(
                &g.stream,
                &xv,
                &wv,
                Some(&b.as_view()),
                0.5,
                &mut MatrixMut::from_slice(out, m, n),
                &mut ws.as_view_mut(),
            )
            .expect("run")
            .expect("non-empty")
        };
        let mut solo = g.stream.clone_htod(&common::poisoned(m * n)).expect("out");
        let plan = call(&mut solo);
        assert!(plan.stream_k_tiles > 0, "{kernel:?} on {m}x{n}x{k} must share tiles along K: {plan:?}");
        g.stream.synchronize().expect("solo");

        let flag = g.stream.alloc_zeros::<i32>(1).expect("flag");
        let timed_out = g.stream.alloc_zeros::<i32>(1).expect("timed_out");
        g.stream.synchronize().expect("zeroed");
        let cfg = LaunchConfig { grid_dim: (held, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: HOLD_BYTES };
        let mut launch = hog_stream.launch_builder(&hog);
        launch.arg(&flag).arg(&MAX_NS).arg(&timed_out);
        // SAFETY: the arguments match the kernel's (int*, u64, int*), both buffers live until the
        // streams are synchronised below.
        unsafe { launch.launch(cfg) }.expect("launch the hog");
        std::thread::sleep(Duration::from_millis(50)); // the hog takes its SMs first

        let mut beside = g.stream.clone_htod(&common::poisoned(m * n)).expect("out");
        let again = call(&mut beside);
        let mut launch = g.stream.launch_builder(&release);
        launch.arg(&flag);
        // SAFETY: one int* (the flag the hog polls: written through a shared reference, which
        // only cudarc's event tracking, off here, would care about), live until the
        // synchronisation below.
        unsafe { launch.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }) }
            .expect("launch the release");
        g.stream.synchronize().expect("the GEMM and the release");
        hog_stream.synchronize().expect("the hog");

        assert_eq!(again, plan);
        let timeouts = g.stream.clone_dtoh(&timed_out).expect("download")[0];
        assert_eq!(
            timeouts,
            0,
            "{kernel:?}: {timeouts} of {held} hog blocks timed out: the GEMM did not finish on the {} SMs left",
            sms - held
        );
        let (s, o) = (g.stream.clone_dtoh(&solo).expect("solo"), g.stream.clone_dtoh(&beside).expect("beside"));
        assert!(
            s.iter().zip(&o).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{kernel:?}: the run beside the hog differs from the solo run"
        );
        println!(
            "{kernel:?} {m}x{n}x{k}: finished beside {held} hog blocks on {} SMs, bitwise the solo run ({plan:?})",
            sms - held
        );
    }
}
