//! Copies of the outputs that a kernel on a host-memory device (the host CPU) writes in place,
//! restored if the launch fails: the caller's slices then hold what they held before, as after a
//! failed launch on a GPU, without the kernel working on a copy that must be copied back.
//!
//! Copies run in parallel on rayon's pool, into buffers kept for the next launch (a fresh
//! allocation of that size costs a page fault per page on first touch, about as much as the copy).

use rayon::prelude::*;
use std::sync::{Mutex, PoisonError};

/// Bytes per parallel copy task (few under Miri, so that its test still copies several chunks
/// of a small output).
const COPY_CHUNK: usize = if cfg!(miri) { 64 } else { 1 << 20 };
/// Buffers kept between launches, at most.
const KEPT_BUFFERS: usize = 8;

/// Buffers of finished launches, for the next backups.
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// The outputs of one launch as they were before it; [`Drop`] writes them back unless
/// [`OutputBackups::keep_results`] was called.
#[derive(Default)]
pub(crate) struct OutputBackups {
    /// Host address and length of each output, and its copy (at least that long).
    saved: Vec<(*mut u8, usize, Vec<u8>)>,
    results_kept: bool,
}

impl OutputBackups {
    /// Copy the `bytes` at `ptr`, to put them back if the launch fails.
    ///
    /// # Safety
    /// `ptr..ptr + bytes` is a host output borrowed mutably for the launch, which outlives
    /// `self`; nothing but the launch's kernel writes it meanwhile.
    pub(crate) unsafe fn save(&mut self, ptr: *mut u8, bytes: usize) {
        let mut copy = spare_buffer(bytes);
        // SAFETY: per the contract, `bytes` readable bytes not written during this call.
        let output = unsafe { std::slice::from_raw_parts(ptr, bytes) };
        parallel_copy(&mut copy[..bytes], output);
        self.saved.push((ptr, bytes, copy));
    }

    /// Put the outputs back as they were when saved (for a launch that runs its kernel again).
    pub(crate) fn restore(&self) {
        for (ptr, bytes, copy) in &self.saved {
            // SAFETY: the output is still borrowed for the launch (the contract of `save`), and
            // the kernel is not running.
            let output = unsafe { std::slice::from_raw_parts_mut(*ptr, *bytes) };
            parallel_copy(output, &copy[..*bytes]);
        }
    }

    /// The launch succeeded: leave the outputs as the kernel wrote them.
    pub(crate) fn keep_results(mut self) {
        self.results_kept = true;
    }
}

impl Drop for OutputBackups {
    fn drop(&mut self) {
        if !self.results_kept {
            self.restore();
        }
        let mut spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, _, copy) in self.saved.drain(..) {
            if spare.len() < KEPT_BUFFERS {
                spare.push(copy);
            }
        }
    }
}

/// A kept buffer of at least `bytes`, else a new one.
fn spare_buffer(bytes: usize) -> Vec<u8> {
    let mut spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner);
    match spare.iter().position(|b| b.len() >= bytes) {
        Some(i) => spare.swap_remove(i),
        None => vec![0; bytes],
    }
}

fn parallel_copy(to: &mut [u8], from: &[u8]) {
    to.par_chunks_mut(COPY_CHUNK)
        .zip(from.par_chunks(COPY_CHUNK))
        .for_each(|(to, from)| to.copy_from_slice(from));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_come_back_unless_the_results_are_kept() {
        for keep in [false, true] {
            let mut output: Vec<u8> = (0..3 * COPY_CHUNK + 5).map(|i| i as u8).collect();
            let before = output.clone();
            let (ptr, len) = (output.as_mut_ptr(), output.len());
            let mut backups = OutputBackups::default();
            // SAFETY: `output` is used through `ptr` alone until `backups` is dropped below.
            unsafe { backups.save(ptr, len) };
            // SAFETY: as above: the kernel's writes.
            let written = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
            written.iter_mut().for_each(|b| *b = b.wrapping_mul(3));
            let written = written.to_vec();
            if keep {
                backups.keep_results();
            } else {
                drop(backups);
            }
            assert_eq!(output, if keep { written } else { before });
        }
    }
}
