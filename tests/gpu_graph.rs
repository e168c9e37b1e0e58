//! `FusedGemm::run` (and `run_with_workspace`) allocates nothing and never waits for the host, so
//! a call can be recorded into a CUDA graph and replayed. The replay must compute exactly what a
//! direct call computes (bit for bit), including after the inputs change in place: the graph
//! holds pointers, not values. Its own test binary, because it turns cudarc's event tracking
//! off for the whole context.

mod common;

use common::{Case, CaseWeight, DeviceInputs, Gpu, Inputs, Rng};
use gemm_epilogue::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use gemm_epilogue::cudarc::driver::CudaSlice;
use gemm_epilogue::{Dispatch, Family, Kernel, MatrixMut, Plan, Precision};

/// One call of `case` into `out` (and `workspace`, when the case asks for one), on `g.stream`,
/// with W as the case passes it: `w`, the W view or a weight prepared before the capture.
fn call(
    g: &Gpu,
    case: &Case,
    d: &DeviceInputs,
    w: &CaseWeight<'_>,
    out: &mut CudaSlice<f32>,
    workspace: &mut CudaSlice<f32>,
) -> Option<Plan> {
    let len = common::extent(case.m, case.n, case.ldo());
    let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + len), case.m, case.n, case.ldo());
    let (x, b) = (d.x_view(case), d.b_view(case));
    let gemm = case.gemm(&g.gemm);
    if case.workspace {
        w.run_with_workspace(&gemm, &g.stream, &x, b.as_ref(), case.scale, &mut o, &mut workspace.as_view_mut())
    } else {
        w.run(&gemm, &g.stream, &x, b.as_ref(), case.scale, &mut o)
    }
    .unwrap_or_else(|e| panic!("run failed for {case:?}: {e}"))
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn run_can_be_captured_into_a_cuda_graph_and_replayed() {
    let Some(g) = common::gpu() else { return };
    // cudarc records an event per buffer use; a captured stream must not wait on events recorded
    // outside the capture, so graph users switch tracking off (before allocating).
    // SAFETY: this test uses one stream; nothing here relies on cudarc's cross-stream ordering.
    unsafe { g.ctx.disable_event_tracking() };
    let mut rng: Rng = common::rng("run_can_be_captured_into_a_cuda_graph_and_replayed");
    let mut cases = vec![
        Case::new(300, 200, 128).scale(0.5), // the default (Nearest), a raw W: mma.sync
        Case::new(300, 200, 128).scale(0.5).prepared_w(true), // a prepared W: TMA + wgmma on sm_90
        Case::new(300, 200, 128).scale(0.5).precision(Precision::Tf32Truncated), // TMA + wgmma on sm_90
        Case::new(257, 130, 131).workspace(true).scale(3.0), // repack kernels + GEMM
        Case::new(65, 70, 33).pad(3, 1, 2).bias(false).scale(-0.25), // 4-byte loads, strided
        // 3xTF32: W split once (prepared), and split into the workspace with X repacked (odd K).
        Case::new(300, 200, 128).scale(0.5).precision(Precision::Tf32x3).prepared_w(true),
        Case::new(257, 130, 131).workspace(true).scale(3.0).precision(Precision::Tf32x3),
        Case::new(300, 200, 128).scale(0.5).precision(Precision::Tf32x3).force(Kernel::Sm80Mma64x64Vec4Tf32x3),
    ];
    if g.is_hopper() {
        // cuLaunchKernelEx with a cluster attribute, captured like any launch.
        cases.push(Case::new(300, 200, 128).scale(0.5).force(Kernel::Sm90Pingpong128x128Cluster2SmemA));
        cases.push(Case::new(300, 300, 96).scale(3.0).force(Kernel::Sm90Cooperative128x256Cluster2SmemA));
        // The kernels that round X in registers: on a prepared W, and on W rounded into the
        // workspace by a repack captured with them.
        cases
            .push(Case::new(300, 200, 128).scale(0.5).force(Kernel::Sm90Pingpong128x128Cluster2RmemA).prepared_w(true));
        cases.push(
            Case::new(300, 300, 96).scale(3.0).force(Kernel::Sm90Cooperative128x256Cluster2RmemA).workspace(true),
        );
        cases.push(
            Case::new(1, 4096, 1024).scale(-2.0).force(Kernel::Sm90Pingpong64x64RmemA).prepared_w(true).workspace(true),
        ); // split-K
           // Stream-K as the TMA kernels plan it: split-K in 11 parts (M = 1), and a shared tail (8
           // waves and 50 tiles, 49 k-blocks a tile: the TMA kernels share no tail of shorter tiles).
           // A replay repeats the captured launch number (GeStreamK): each launch must leave its
           // hand-off words cleared for the next replay.
        cases.push(Case::new(1, 768, 3072).scale(0.5).force(Kernel::Sm90Pingpong64x64SmemA).workspace(true));
        cases.push(Case::new(70783, 253, 1540).scale(0.5).force(Kernel::Sm90Pingpong128x128SmemA).workspace(true));
        // Auto's skinny kernel at decoding size: K split over clusters of 3 CTAs; and its GEMV
        // kernel (M = 1).
        cases.push(Case::new(5, 768, 3072).scale(0.5));
        cases.push(Case::new(1, 768, 3072).scale(-2.0).bias(false));
    }
    for case in cases {
        let inputs = Inputs::generate(&case, &mut rng);
        let mut d = DeviceInputs::upload(&g, &inputs);
        // Prepared before the capture: `prepare_weight` allocates.
        let w = CaseWeight::new(&case.gemm(&g.gemm), &g.stream, &case, common::w_view_of(&d.w, &case));
        let ws_len = w.workspace_len(&case.gemm(&g.gemm), &g.stream, &d.x_view(&case)).expect("workspace_len");
        let mut workspace = g.stream.alloc_zeros::<f32>(ws_len.max(1)).expect("workspace");
        let mut direct = g.stream.clone_htod(&common::poisoned(common::out_len(&case))).expect("out");
        let mut replayed = g.stream.clone_htod(&common::poisoned(common::out_len(&case))).expect("out");

        let plan = call(&g, &case, &d, &w, &mut direct, &mut workspace);

        g.stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).expect("begin capture");
        let captured_plan = call(&g, &case, &d, &w, &mut replayed, &mut workspace);
        let graph = g
            .stream
            .end_capture(CUgraphInstantiate_flags(0))
            .expect("end capture")
            .expect("the capture recorded a graph");
        assert_eq!(plan, captured_plan, "{case:?}");
        if !case.workspace && case.dispatch == Dispatch::Auto && (case.m, case.k) == (5, 3072) {
            assert!(
                g.gemm.device().sm_count != 132
                    || plan.is_some_and(|p| p.kernel.family() == Family::Skinny && p.cluster == 3),
                "{case:?}: {plan:?}"
            );
        }
        if !case.workspace && case.dispatch == Dispatch::Auto && (case.m, case.k) == (1, 3072) {
            assert!(plan.is_some_and(|p| p.kernel.family() == Family::Gemv), "{case:?}: {plan:?}");
        }
        if case.workspace && case.m * case.k == 3072 || case.m == 70783 {
            // The stream-K cases above (their plans on the H200's 132 SMs).
            assert!(
                g.gemm.device().sm_count != 132 || plan.is_some_and(|p| p.stream_k_tiles > 0),
                "{case:?}: {plan:?}"
            );
        }
        common::assert_all_poisoned(&g.stream.clone_dtoh(&replayed).expect("download"), "captured, not yet replayed");

        graph.launch().expect("replay");
        let want = g.stream.clone_dtoh(&direct).expect("download");
        let got = g.stream.clone_dtoh(&replayed).expect("download");
        assert!(bits(&got) == bits(&want), "replay differs from the direct call for {case:?} ({plan:?})");
        common::take_view_checked(&got, case.off_o, case.m, case.n, case.ldo(), &format!("replay {case:?}"));
        // Replayed again at once: the same launch numbers, on what the first replay left.
        g.stream.memcpy_htod(&common::poisoned(common::out_len(&case)), &mut replayed).expect("poison");
        graph.launch().expect("replay again");
        let got = g.stream.clone_dtoh(&replayed).expect("download");
        assert!(bits(&got) == bits(&want), "a second replay in a row differs for {case:?} ({plan:?})");

        // New X in the same buffer: the replay reads it through the captured pointers.
        let fresh = Inputs::generate(&case, &mut rng);
        g.stream.memcpy_htod(&fresh.x, &mut d.x).expect("update x");
        call(&g, &case, &d, &w, &mut direct, &mut workspace);
        graph.launch().expect("replay");
        let want = g.stream.clone_dtoh(&direct).expect("download");
        let got = g.stream.clone_dtoh(&replayed).expect("download");
        assert!(bits(&got) == bits(&want), "replay after updating x differs for {case:?} ({plan:?})");
        println!("{case:?}: {plan:?} captured and replayed bit-identically");
    }
}
