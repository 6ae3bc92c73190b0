//! Page-locked bounce buffers for the small copies of plain launches. A launch stages its small
//! host arguments through one: the copies in are then queued from page-locked memory (no pageable
//! path in the driver), and the copies back land in it first, right behind the kernel, reaching
//! the caller's memory only once the kernel is known to have succeeded. So a small launch waits
//! once, for its copies in, the kernel and its copies back together.

use crate::plugins::Backend;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes of one bounce buffer: the host arguments of a launch that fit in it go through it.
pub(crate) const BOUNCE_BYTES: usize = 64 << 10;
/// Where each argument starts in the buffer.
const SLOT_ALIGN: usize = 64;

/// A device's bounce buffers, reused launch after launch (one per launch in flight).
#[derive(Default)]
pub(crate) struct BouncePool(Mutex<Vec<PinnedBlock>>);

/// `BOUNCE_BYTES` of page-locked host memory of one plugin.
struct PinnedBlock {
    ptr: *mut u8,
    backend: Arc<dyn Backend>,
}

// SAFETY: plain page-locked memory, used by one launch at a time (taken out of the pool).
unsafe impl Send for PinnedBlock {}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        // SAFETY: from this plugin's `alloc_pinned`; blocks go back to the pool (and so can be
        // dropped) only once no queued copy uses them.
        unsafe { self.backend.free_pinned(self.ptr) };
    }
}

/// One launch's bounce buffer, taken from the pool at its first slot and given back when
/// dropped, which must be once no queued copy uses it any more.
pub(crate) struct Bounce<'p> {
    pool: &'p BouncePool,
    backend: &'p Arc<dyn Backend>,
    block: Option<PinnedBlock>,
    used: usize,
    /// The plugin gave no page-locked memory: every argument takes the ordinary path.
    refused: bool,
}

impl BouncePool {
    /// A launch's bounce buffer on `backend` (the pool's device), empty until its first slot.
    pub fn launch<'p>(&'p self, backend: &'p Arc<dyn Backend>) -> Bounce<'p> {
        Bounce {
            pool: self,
            backend,
            block: None,
            used: 0,
            refused: false,
        }
    }
}

impl Bounce<'_> {
    /// Room for `bytes` (> 0) bytes of this launch, `None` when they do not fit in what is left
    /// or the plugin has no page-locked memory.
    pub fn slot(&mut self, bytes: usize) -> Option<*mut u8> {
        if self.refused || self.used + bytes > BOUNCE_BYTES {
            return None;
        }
        if self.block.is_none() {
            let pooled = self
                .pool
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let block = match pooled {
                Some(block) => block,
                None => match self.backend.alloc_pinned(BOUNCE_BYTES) {
                    Ok(ptr) => PinnedBlock {
                        ptr,
                        backend: self.backend.clone(),
                    },
                    Err(e) => {
                        tracing::debug!(device = %self.backend.name(), "no bounce buffer ({e}): small copies take the pageable path");
                        self.refused = true;
                        return None;
                    }
                },
            };
            self.block = Some(block);
        }
        let block = self.block.as_ref()?;
        // SAFETY: `used + bytes` is within the block's `BOUNCE_BYTES`.
        let slot = unsafe { block.ptr.add(self.used) };
        self.used = (self.used + bytes).next_multiple_of(SLOT_ALIGN);
        Some(slot)
    }
}

impl Drop for Bounce<'_> {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(block);
        }
    }
}
