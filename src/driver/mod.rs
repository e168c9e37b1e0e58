//! Raw driver calls that cudarc's safe API does not cover: cluster launches and their occupancy
//! query, a stream-ordered memset ([`launch`]), and TMA tensor maps ([`tma`]). Nothing here
//! allocates or synchronises, so every call can be captured into a CUDA graph.

pub(crate) mod launch;
pub(crate) mod tma;
