//! NCCL through cudarc's `result` and `sys` layers: the library check that turns cudarc's panic
//! into [`Error::NoNccl`], the communicators of one process driving every device, groups, and
//! the four operations the layer issues.
//!
//! Not cudarc's `safe::Comm`: it creates communicators only with the default configuration
//! and does not expose its handle, and the gathered forward needs both: communicators whose
//! CTA policy lets NCCL gather on the copy engines (`NCCL_CTA_POLICY_ZERO`), and windows
//! registered on them (`gather_buffers.rs`).

use std::ffi::c_int;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::result::{self, group_end, group_start};
use cudarc::nccl::sys;

use crate::error::{Error, Result};

/// Whether cudarc can load NCCL. cudarc panics on first use when it cannot, so every entry
/// point asks this first. cudarc looks for `libnccl.so` (not the `libnccl.so.2` soname a
/// runtime-only install has): README, "Several GPUs".
pub fn nccl_library_present() -> bool {
    // SAFETY: as cudarc's own check: loading the library runs its initialisers; nothing is called.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// The first NCCL release with copy-engine all-gathers (2.28.0, as `NCCL_VERSION_CODE`).
const COPY_ENGINE_COLLECTIVES: c_int = 22800;

/// One communicator per device, rank g on device g, each on its own stream (the layer's
/// communication streams, apart from its compute streams so the two overlap).
pub(crate) struct Comms {
    ranks: Vec<RankComm>,
    /// `ncclGetVersion` of the library loaded.
    version: c_int,
}

/// Rank g: its communicator and the stream its operations are queued on.
pub(crate) struct RankComm {
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; the layer keeps
// its `Comms` behind a mutex, so calls never overlap, and the streams it holds are `Send`.
unsafe impl Send for Comms {}

impl std::fmt::Debug for Comms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comms").field("ranks", &self.ranks.len()).field("version", &self.version).finish()
    }
}

impl Comms {
    /// One `ncclCommInitRankConfig` per device of `streams`, in order (rank g on `streams[g]`),
    /// inside one group, with the CTA policy `NCCL_CTA_POLICY_ZERO`: NCCL runs a collective on
    /// the copy engines where it can (an all-gather into registered windows, NCCL ≥ 2.28) and
    /// with its kernels as before everywhere else.
    pub fn init(streams: Vec<Arc<CudaStream>>) -> Result<Self> {
        if !nccl_library_present() {
            return Err(Error::NoNccl);
        }
        let version = result::get_nccl_version()?;
        let id = result::get_uniqueid()?;
        let world = c_int::try_from(streams.len())
            .map_err(|_| Error::InvalidDevices { reason: "more devices than NCCL ranks" })?;
        // Inside the group a missing rank would make `ncclGroupEnd` wait for it forever, so
        // whatever can fail on our side fails before the group starts.
        for stream in &streams {
            stream.context().bind_to_thread()?;
        }
        let mut ranks = Vec::with_capacity(streams.len());
        group_start()?;
        let mut issued: Result<()> = Ok(());
        for (g, stream) in streams.into_iter().enumerate() {
            // NCCL takes the device from the calling thread's current context (bound above once
            // already, so this does not fail).
            if let Err(e) = stream.context().bind_to_thread() {
                issued = Err(e.into());
                break;
            }
            let mut config = zero_cta_config();
            let mut comm = std::ptr::null_mut();
            // SAFETY: `comm` and `config` outlive the call; `g < world` (both from `streams`).
            match unsafe { result::comm_init_rank_config(&mut comm, world, id, g as c_int, &mut config) } {
                Ok(_) => ranks.push(RankComm { comm, stream }),
                Err(e) => {
                    issued = Err(e.into());
                    break;
                }
            }
        }
        let ended = group_end();
        let comms = Self { ranks, version };
        issued?;
        ended?;
        Ok(comms)
    }

    /// Whether the library has copy-engine all-gathers (and the window API they need).
    pub fn has_copy_engine_gathers(&self) -> bool {
        self.version >= COPY_ENGINE_COLLECTIVES
    }

    /// Rank `g`'s communicator.
    pub fn rank(&self, g: usize) -> &RankComm {
        &self.ranks[g]
    }

    /// Every rank, in order.
    pub fn ranks(&self) -> &[RankComm] {
        &self.ranks
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
        self.ranks.iter().map(|r| r.stream.clone())
    }
}

impl RankComm {
    /// The stream this rank's operations are queued on.
    pub fn stream(&self) -> Arc<CudaStream> {
        self.stream.clone()
    }

    /// The raw communicator, for the window calls of `gather_buffers.rs`.
    pub fn handle(&self) -> sys::ncclComm_t {
        self.comm
    }

    /// `ncclBroadcast` of `send` (on the root only) into `recv`, from rank `root`.
    pub fn broadcast<S: DevicePtr<f32>, R: DevicePtrMut<f32>>(
        &self,
        send: Option<&S>,
        recv: &mut R,
        root: usize,
    ) -> Result<()> {
        let count = recv.len();
        let src = send.map(|s| s.device_ptr(&self.stream));
        let (dst, _dst_used) = recv.device_ptr_mut(&self.stream);
        let src_ptr = src.as_ref().map_or(dst, |(p, _)| *p);
        // SAFETY: both pointers hold `count` f32 (a root's `send` is as long as every `recv`,
        // which the caller allocates so); the events recorded are kept until after the call.
        unsafe {
            result::broadcast(
                src_ptr as _,
                dst as _,
                count,
                sys::ncclDataType_t::ncclFloat32,
                root as c_int,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }?;
        Ok(())
    }

    /// `ncclSend` of `send` to rank `peer`.
    pub fn send<S: DevicePtr<f32>>(&self, send: &S, peer: usize) -> Result<()> {
        let (src, _used) = send.device_ptr(&self.stream);
        // SAFETY: `src` holds `send.len()` f32.
        unsafe {
            result::send(
                src as _,
                send.len(),
                sys::ncclDataType_t::ncclFloat32,
                peer as c_int,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }?;
        Ok(())
    }

    /// `ncclRecv` into `recv` from rank `peer`.
    pub fn recv<R: DevicePtrMut<f32>>(&self, recv: &mut R, peer: usize) -> Result<()> {
        let count = recv.len();
        let (dst, _used) = recv.device_ptr_mut(&self.stream);
        // SAFETY: `dst` holds `count` f32.
        unsafe {
            result::recv(
                dst as _,
                count,
                sys::ncclDataType_t::ncclFloat32,
                peer as c_int,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }?;
        Ok(())
    }

    /// The in-place `ncclAllGather` of `ranks` blocks of `block` f32 each at the start of
    /// `buffer`: this rank's block (at `rank · block`) goes to the same place on every rank.
    pub fn all_gather_in_place<R: DevicePtrMut<f32>>(&self, buffer: &mut R, block: usize, rank: usize) -> Result<()> {
        let ranks = self.world()?;
        let needed = block.saturating_mul(ranks);
        if buffer.len() < needed || rank >= ranks {
            return Err(Error::ShapeMismatch {
                what: "gather buffer vs ranks · block",
                expected: needed,
                found: buffer.len(),
            });
        }
        let (base, _used) = buffer.device_ptr_mut(&self.stream);
        let send = base + (rank * block * std::mem::size_of::<f32>()) as u64;
        // SAFETY: `buffer` holds `ranks · block` f32 (checked above); in place, as NCCL
        // defines it (send = recv + rank · block).
        unsafe {
            result::all_gather(
                send as _,
                base as _,
                block,
                sys::ncclDataType_t::ncclFloat32,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }?;
        Ok(())
    }

    /// Ranks in the communicator.
    fn world(&self) -> Result<usize> {
        // SAFETY: a live communicator.
        Ok(unsafe { result::comm_count(self.comm) }? as usize)
    }
}

impl Drop for RankComm {
    fn drop(&mut self) {
        // Abort, as cudarc does: `ncclCommFinalize` would wait for the other ranks, which this
        // thread drops one after another. Nothing is in flight (the layer's streams are
        // ordered before it is dropped); an error here has nowhere to go.
        // SAFETY: a live communicator, dropped once.
        let _ = unsafe { result::comm_abort(self.comm) };
    }
}

/// `NCCL_CONFIG_INITIALIZER` with `CTAPolicy = NCCL_CTA_POLICY_ZERO`. The struct is cudarc's
/// binding of NCCL 2.30's (up to `maxP2pPeers`), so it says version 2.30.0; an older library
/// reads the fields it knows and a newer one defaults those it adds.
fn zero_cta_config() -> sys::ncclConfig_t {
    const UNDEF: c_int = c_int::MIN; // NCCL_CONFIG_UNDEF_INT
    sys::ncclConfig_t {
        size: std::mem::size_of::<sys::ncclConfig_t>(),
        magic: 0xcafe_beef, // NCCL_API_MAGIC
        version: 23000,     // NCCL_VERSION(2, 30, 0)
        blocking: UNDEF,
        cgaClusterSize: UNDEF,
        minCTAs: UNDEF,
        maxCTAs: UNDEF,
        netName: std::ptr::null(),
        splitShare: UNDEF,
        trafficClass: UNDEF,
        commName: std::ptr::null(),
        collnetEnable: UNDEF,
        CTAPolicy: 0x02, // NCCL_CTA_POLICY_ZERO
        shrinkShare: UNDEF,
        nvlsCTAs: UNDEF,
        nChannelsPerNetPeer: UNDEF,
        nvlinkCentricSched: UNDEF,
        graphUsageMode: UNDEF,
        numRmaCtx: UNDEF,
        maxP2pPeers: UNDEF,
    }
}
