//! The kernels: what the fatbin holds ([`catalogue`], one table row per kernel) and the fatbin
//! loaded into a context ([`loaded`]), once per context ([`shared`]).

pub(crate) mod catalogue;
pub(crate) mod loaded;
pub(crate) mod shared;

pub use catalogue::{Family, Kernel, Precision};
