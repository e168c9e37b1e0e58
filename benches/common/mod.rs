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
