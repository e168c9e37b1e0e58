//! NCCL through cudarc: the library check that turns cudarc's panic into [`Error::NoNccl`], the
//! communicators of one process driving every device, and the group that lets one host thread
//! issue a collective for all of them.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cudarc::nccl::safe::{group_end, group_start, Comm};

use crate::error::{Error, Result};

/// Whether cudarc can load NCCL. cudarc panics on first use when it cannot, so every entry
/// point asks this first. cudarc looks for `libnccl.so` (not the `libnccl.so.2` soname a
/// runtime-only install has): README, "Several GPUs".
pub fn nccl_library_present() -> bool {
    // SAFETY: as cudarc's own check: loading the library runs its initialisers; nothing is called.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// One communicator per device, rank g on device g, each on its own stream (the layer's
/// communication streams, apart from its compute streams so the two overlap).
pub(crate) struct Comms(Vec<Comm>);

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; the layer keeps
// its `Comms` behind a mutex, so calls never overlap, and the streams it holds are `Send`.
unsafe impl Send for Comms {}

impl std::fmt::Debug for Comms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comms").field("ranks", &self.0.len()).finish()
    }
}

impl Comms {
    /// `ncclCommInitAll` over the devices of `streams`, in order (rank g on `streams[g]`).
    pub fn init(streams: Vec<Arc<CudaStream>>) -> Result<Self> {
        if !nccl_library_present() {
            return Err(Error::NoNccl);
        }
        Ok(Self(Comm::from_devices(streams)?))
    }

    /// Rank `g`'s communicator.
    pub fn rank(&self, g: usize) -> &Comm {
        &self.0[g]
    }

    /// Runs `issue` (which queues one operation per rank) between `ncclGroupStart` and
    /// `ncclGroupEnd`: from one thread, a collective must be issued for every rank inside one
    /// group, or the first rank's call waits for the others forever. The group ends also when
    /// `issue` fails, so NCCL is never left inside a group.
    ///
    /// NCCL queues the work on the streams only at `ncclGroupEnd`, after cudarc recorded its
    /// "buffer used" events inside `issue`: those events complete too early, so callers order
    /// the streams themselves after the group ([`CudaStream::join`]) before anything else
    /// touches the buffers.
    pub fn group(&self, issue: impl FnOnce(&Self) -> Result<()>) -> Result<()> {
        group_start()?;
        let issued = issue(self);
        let ended = group_end();
        issued?;
        ended?;
        Ok(())
    }

    /// Every rank's stream.
    pub fn streams(&self) -> impl Iterator<Item = Arc<CudaStream>> + '_ {
        self.0.iter().map(|c| c.stream())
    }
}
