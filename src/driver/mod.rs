//! Raw driver calls that cudarc's safe API does not cover: cluster launches and their occupancy
//! query ([`launch`]), TMA tensor maps ([`tma`]), and what the driver
//! knows of raw addresses and streams ([`pointer`], for `FusedGemm::run_raw`), a 2-D copy
//! between device buffers ([`copy`], for the sharded layer's gather). Nothing here allocates or
//! synchronises, so every launch can be captured into a CUDA graph.

#[cfg(feature = "nccl")]
pub(crate) mod copy;
pub(crate) mod launch;
pub(crate) mod pointer;
pub(crate) mod tma;
