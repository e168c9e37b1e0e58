//! What the crate's tests, benchmarks and examples compare against — not part of the product,
//! compiled only with the `testbed` feature (which also turns on cudarc's cuBLAS and cuBLASLt):
//! - [`CublasBaseline`]: cuBLAS's TF32 GEMM, then one elementwise pass of ours applying the same
//!   epilogue functor (what a user would do without this crate);
//! - [`CublasLtLinear`]: cuBLASLt's GEMM with its bias epilogue in one call;
//! - [`timing`]: interleaved CUDA-event timing of several variants;
//! - [`reference`](mod@reference): the f64 CPU reference with a per-element error scale, and the seeded
//!   generator of test inputs;
//! - [`tf32`]: the TF32-emulating reference (operands converted as a call converted them, f64
//!   sums) and its accumulation bound.

mod cublas;
mod cublaslt;
pub mod reference;
pub mod tf32;
pub mod timing;

use std::fmt;

pub use cublas::{CublasBaseline, CublasCompute};
pub use cublaslt::{CublasLtLinear, CublasLtPlan};

/// What a testbed call can fail with: the crate's own errors, and those of the libraries it
/// compares against.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Validation or a launch of ours.
    Gemm(crate::Error),
    /// A CUDA driver call.
    Driver(cudarc::driver::DriverError),
    /// A cuBLAS call.
    Cublas(cudarc::cublas::result::CublasError),
    /// A cuBLASLt call.
    CublasLt(cudarc::cublaslt::result::CublasError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Gemm(e) => e.fmt(f),
            Error::Driver(e) => write!(f, "CUDA driver error: {e:?}"),
            Error::Cublas(e) => write!(f, "cuBLAS error: {e:?}"),
            Error::CublasLt(e) => write!(f, "cuBLASLt error: {e:?}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Gemm(e) => Some(e),
            Error::Driver(e) => Some(e),
            Error::Cublas(e) => Some(e),
            Error::CublasLt(e) => Some(e),
        }
    }
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::Driver(d) => Error::Driver(d),
            e => Error::Gemm(e),
        }
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::Driver(e)
    }
}

impl From<cudarc::cublas::result::CublasError> for Error {
    fn from(e: cudarc::cublas::result::CublasError) -> Self {
        Error::Cublas(e)
    }
}

impl From<cudarc::cublaslt::result::CublasError> for Error {
    fn from(e: cudarc::cublaslt::result::CublasError) -> Self {
        Error::CublasLt(e)
    }
}

/// `Result` with the testbed's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
