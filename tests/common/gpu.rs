//! GPU or skip: the context, a stream, the loaded kernels and the cuBLAS baseline of a test.

use std::sync::Arc;

use gemm_epilogue::cudarc::driver::{CudaContext, CudaStream};
use gemm_epilogue::testbed::CublasBaseline;
use gemm_epilogue::{cuda_context, Error, FusedGemm};

/// Everything a GPU test needs.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    /// Auto dispatch; use `gemm.with_dispatch(..)` for others.
    pub gemm: FusedGemm,
    pub baseline: CublasBaseline,
}

impl Gpu {
    pub fn is_hopper(&self) -> bool {
        self.gemm.device().is_hopper()
    }
}

/// True when `GEMM_EPILOGUE_REQUIRE_GPU=1`: a missing GPU fails instead of skipping.
pub fn require_gpu() -> bool {
    std::env::var("GEMM_EPILOGUE_REQUIRE_GPU").is_ok_and(|v| v.trim() == "1")
}

/// [`gpu`], for tests of the sm_90 kernels: on another device it prints
/// `skipped: {what} needs an sm_90 device, …` and returns None (a GPU that is not sm_90 is a
/// reason to skip even with `GEMM_EPILOGUE_REQUIRE_GPU=1`).
pub fn hopper_gpu(what: &str) -> Option<Gpu> {
    let g = gpu()?;
    if !g.is_hopper() {
        println!("skipped: {what} needs an sm_90 device, this is {:?}", g.gemm.device().compute_capability);
        return None;
    }
    Some(g)
}

/// The GPU, or `None` after printing `skipped: <reason>` (panics instead when
/// `GEMM_EPILOGUE_REQUIRE_GPU=1`). Every GPU test calls this first.
pub fn gpu() -> Option<Gpu> {
    fn skip(reason: String) -> Option<Gpu> {
        if require_gpu() {
            panic!("GEMM_EPILOGUE_REQUIRE_GPU=1 but no usable GPU: {reason}");
        }
        println!("skipped: {reason}");
        None
    }
    let ctx = match cuda_context(0) {
        Ok(ctx) => ctx,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => return skip(e.to_string()),
        Err(e) => panic!("cuda_context(0) failed unexpectedly: {e}"),
    };
    let gemm = match FusedGemm::new(&ctx) {
        Ok(g) => g,
        Err(e @ Error::UnsupportedDevice { .. }) => return skip(e.to_string()),
        Err(e) => panic!("FusedGemm::new failed: {e}"),
    };
    let stream = ctx.new_stream().expect("new stream");
    let baseline = CublasBaseline::new(&gemm, stream.clone()).expect("cuBLAS handle");
    println!("device: {:?}", gemm.device());
    Some(Gpu { ctx, stream, gemm, baseline })
}
