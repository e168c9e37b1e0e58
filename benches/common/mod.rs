//! Shared by the bench executables. Each bench uses a part of it, hence the `allow(dead_code)`
//! on the modules (an item one bench leaves unused is not dead in another).

#[allow(dead_code)]
pub mod args;
#[allow(dead_code)]
pub mod run_info;

/// Without a GPU a bench prints why and does nothing, unless `GEMM_EPILOGUE_REQUIRE_GPU=1`
/// (the GPU runner sets it): then a missing GPU is an error.
pub fn skip_or_fail(reason: String) {
    if std::env::var("GEMM_EPILOGUE_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        eprintln!("error: GEMM_EPILOGUE_REQUIRE_GPU=1 but {reason}");
        std::process::exit(1);
    }
    println!("skipped: {reason}");
}

/// Device 0, the fused kernels loaded into it, and the device in words for a report's header
/// ("NVIDIA H200 (sm_90, 132 SMs)"); `None` after [`skip_or_fail`] without a GPU or when the
/// kernels cannot load there.
#[allow(dead_code)]
pub fn open_gpu(
) -> Option<(std::sync::Arc<gemm_epilogue::cudarc::driver::CudaContext>, gemm_epilogue::FusedGemm, String)> {
    let ctx = match gemm_epilogue::cuda_context(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            skip_or_fail(format!("no CUDA device: {e}"));
            return None;
        }
    };
    let gemm = match gemm_epilogue::FusedGemm::new(&ctx) {
        Ok(g) => g,
        Err(e) => {
            skip_or_fail(format!("the fused kernels cannot load: {e}"));
            return None;
        }
    };
    let (cc, sms) = (gemm.device().compute_capability, gemm.device().sm_count);
    let device = format!("{} (sm_{}{}, {sms} SMs)", ctx.name().unwrap_or_else(|_| "unknown GPU".into()), cc.0, cc.1);
    Some((ctx, gemm, device))
}
