//! Device memory the plugin frees in queue order and keeps for reuse. liboffload 22 frees at
//! once (`cuMemFree` on CUDA, which waits for the whole device), while the runtime frees a
//! stream's buffers as soon as their work is queued: freeing at once would serialise every
//! stream (measured on the H200: no overlap at all). So a freed block is kept with an event
//! after the work queued on its queue, and handed out again for an allocation of the same size
//! on the same queue (queue order makes that safe) or on any queue once its event has completed.
//! Kept blocks go back to the device at release, before an allocation is called out of memory,
//! and the oldest when more than [`KEPT_BLOCKS`] are kept.

use crate::plugins::liboffload::handle::Handle;
use crate::plugins::liboffload::result::{Ol, OlError};
use crate::plugins::liboffload::sys;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Mutex;

/// How many freed blocks are kept at most.
pub const KEPT_BLOCKS: usize = 64;

#[derive(Default)]
pub struct Pool {
    blocks: Mutex<VecDeque<Block>>,
}

struct Block {
    ptr: u64,
    bytes: usize,
    /// The queue whose work used it last; null once that queue is gone (its work done).
    queue: Handle<sys::ol_queue_impl_t>,
    /// After that work; `None` once it is known to have run. Destroyed before its queue is:
    /// liboffload 22 asks an event's queue whether the event completed, so asking after the
    /// queue is gone reads freed memory (it crashed under compute-sanitizer on the H200).
    freed_after: Option<Handle<sys::ol_event_impl_t>>,
}

impl Pool {
    fn blocks(&self) -> std::sync::MutexGuard<'_, VecDeque<Block>> {
        self.blocks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A kept block of exactly `bytes` that work queued on `queue` may use from now on.
    ///
    /// # Safety
    /// `queue` is a live queue of the pool's device.
    pub unsafe fn take(&self, ol: Ol, bytes: usize, queue: sys::ol_queue_handle_t) -> Option<u64> {
        let mut blocks = self.blocks();
        let usable = |b: &Block| {
            b.bytes == bytes
                && (b.queue.0 == queue
                    || b.freed_after.is_none_or(|event| {
                        // SAFETY: kept events are live, and their queues too (see `forget_queue`).
                        let complete = unsafe { ol.event_complete(event.0) };
                        complete == Ok(true)
                    }))
        };
        let index = blocks.iter().position(usable)?;
        let block = blocks.remove(index).expect("found above");
        if let Some(event) = block.freed_after {
            // SAFETY: the event leaves the pool with its block and is not used again.
            let _ = unsafe { ol.destroy_event(event.0) };
        }
        Some(block.ptr)
    }

    /// Keeps `ptr` (`bytes` long) for reuse once the work queued on `queue` so far has run.
    /// Returns the blocks given back to the device to stay within [`KEPT_BLOCKS`], as
    /// (address, bytes).
    ///
    /// # Safety
    /// `ptr` is a device allocation of the pool's device that nothing queued after this uses;
    /// `queue` is live.
    pub unsafe fn keep(
        &self,
        ol: Ol,
        ptr: u64,
        bytes: usize,
        queue: sys::ol_queue_handle_t,
    ) -> Result<Vec<(u64, usize)>, OlError> {
        // SAFETY: per this function's contract.
        let event = unsafe { ol.create_event(queue) }?;
        let mut blocks = self.blocks();
        blocks.push_back(Block {
            ptr,
            bytes,
            queue: Handle(queue),
            freed_after: Some(Handle(event)),
        });
        let mut returned = Vec::new();
        while blocks.len() > KEPT_BLOCKS {
            let oldest = blocks.pop_front().expect("more than KEPT_BLOCKS");
            // SAFETY: the block leaves the pool; its event is live until then.
            unsafe { oldest.give_back(ol) }?;
            returned.push((oldest.ptr, oldest.bytes));
        }
        Ok(returned)
    }

    /// Gives every kept block back to the device, once the work that used it has run; returns
    /// them as (address, bytes).
    ///
    /// # Safety
    /// The pool's device is live.
    pub unsafe fn trim(&self, ol: Ol) -> Vec<(u64, usize)> {
        let mut returned = Vec::new();
        for block in self.blocks().drain(..) {
            // SAFETY: the block leaves the pool; its event is live until then.
            match unsafe { block.give_back(ol) } {
                Ok(()) => returned.push((block.ptr, block.bytes)),
                Err(e) => tracing::warn!("returning kept device memory failed: {e}"),
            }
        }
        returned
    }

    /// `queue` is going away with its work done: its blocks are free for any queue, and their
    /// events, which liboffload ties to the queue, go first.
    ///
    /// # Safety
    /// `queue` is live and synchronized.
    pub unsafe fn forget_queue(&self, ol: Ol, queue: sys::ol_queue_handle_t) {
        for block in self.blocks().iter_mut().filter(|b| b.queue.0 == queue) {
            block.queue = Handle(std::ptr::null_mut());
            if let Some(event) = block.freed_after.take() {
                // SAFETY: the event is live and, its queue done, no longer needed.
                let _ = unsafe { ol.destroy_event(event.0) };
            }
        }
    }
}

impl Block {
    /// Waits for the work that used the block, then frees it.
    ///
    /// # Safety
    /// The block's event (if any) is live, and neither it nor the block is used afterwards.
    unsafe fn give_back(&self, ol: Ol) -> Result<(), OlError> {
        // SAFETY: per this function's contract.
        unsafe {
            if let Some(event) = self.freed_after {
                ol.sync_event(event.0)?;
                let _ = ol.destroy_event(event.0);
            }
            ol.mem_free(self.ptr as *mut c_void)
        }
    }
}
