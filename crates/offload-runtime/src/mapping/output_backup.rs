//! Copies of the outputs that a kernel on a host-memory device (the host CPU) writes in place,
//! restored if the launch fails: the caller's slices then hold what they held before, as after a
//! failed launch on a GPU, without the kernel working on a copy that must be copied back.
//!
//! Each output has a buffer of its size, kept for the next launch (a fresh allocation costs a
//! page fault per page on first touch, about as much as the copy). The plugin saves into it
//! either every output whole, in parallel on rayon's pool, or the runs of elements that the
//! kernel's threads are about to write, from the tasks that write them (in cache); a failed
//! launch gets back exactly what was saved.

use crate::plugins::SavedOutputs;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

/// Bytes per parallel copy task (few under Miri, so that its test still copies several chunks
/// of a small output).
const COPY_CHUNK: usize = if cfg!(miri) { 64 } else { 1 << 20 };
/// Buffers kept between launches, at most.
const KEPT_BUFFERS: usize = 8;

/// Buffers of finished launches, for the next backups.
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// One output: its host address and length, and the buffer its saved bytes go to (at the same
/// offsets; at least that long).
struct Output {
    ptr: *mut u8,
    bytes: usize,
    copy: Vec<u8>,
    /// `copy`'s first byte, written through by concurrent `save`s of disjoint ranges.
    copy_ptr: *mut u8,
}

/// The outputs of one launch; [`Drop`] writes back what was saved of them unless
/// [`OutputBackups::keep_results`] was called.
#[derive(Default)]
pub(crate) struct OutputBackups {
    outputs: Vec<Output>,
    /// Host address ranges saved so far.
    saved: Mutex<Vec<Range<usize>>>,
    results_kept: bool,
}

// SAFETY: the raw pointers are the outputs borrowed for the launch and the buffers owned here;
// concurrent `save`s write disjoint ranges (the contract of `SavedOutputs::save`), and the list
// of saved ranges is behind a mutex.
unsafe impl Sync for OutputBackups {}

impl OutputBackups {
    /// The `bytes` at `ptr` are an output, to be saved before the kernel writes them.
    ///
    /// # Safety
    /// `ptr..ptr + bytes` is a host output borrowed mutably for the launch, which outlives
    /// `self`; nothing but the launch's kernel writes it meanwhile.
    pub(crate) unsafe fn add(&mut self, ptr: *mut u8, bytes: usize) {
        let mut copy = spare_buffer(bytes);
        let copy_ptr = copy.as_mut_ptr();
        self.outputs.push(Output {
            ptr,
            bytes,
            copy,
            copy_ptr,
        });
    }

    fn saved(&self) -> std::sync::MutexGuard<'_, Vec<Range<usize>>> {
        self.saved.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The launch succeeded: leave the outputs as the kernel wrote them.
    pub(crate) fn keep_results(mut self) {
        self.results_kept = true;
    }
}

impl SavedOutputs for OutputBackups {
    fn save_all(&self) {
        for o in &self.outputs {
            // SAFETY: per the contract of `add`, `bytes` readable bytes not written during this
            // call; `copy` holds at least as many and nothing else uses it now.
            let (output, copy) = unsafe {
                (
                    std::slice::from_raw_parts(o.ptr, o.bytes),
                    std::slice::from_raw_parts_mut(o.copy_ptr, o.bytes),
                )
            };
            parallel_copy(copy, output);
        }
        *self.saved() = self
            .outputs
            .iter()
            .map(|o| o.ptr as usize..o.ptr as usize + o.bytes)
            .collect();
    }

    unsafe fn save(&self, address: usize, bytes: usize) {
        let range = address..address + bytes;
        let Some(o) = self
            .outputs
            .iter()
            .find(|o| (o.ptr as usize..o.ptr as usize + o.bytes).contains(&address))
        else {
            return;
        };
        let offset = address - o.ptr as usize;
        // Within the output, whatever the caller names.
        let bytes = bytes.min(o.bytes - offset);
        // SAFETY: within the output and its copy; the caller guarantees that nothing writes
        // these output bytes or copies to these buffer bytes meanwhile.
        unsafe { copy_around_cache(o.ptr.add(offset), o.copy_ptr.add(offset), bytes) };
        self.saved().push(range.start..range.start + bytes);
    }

    fn restore(&self) {
        let saved = self.saved();
        for range in saved.iter() {
            let o = self
                .outputs
                .iter()
                .find(|o| o.ptr as usize <= range.start && range.start < o.ptr as usize + o.bytes)
                .expect("saved bytes lie in an output");
            let offset = range.start - o.ptr as usize;
            let bytes = range.end - range.start;
            // SAFETY: the output is still borrowed for the launch (the contract of `add`), the
            // kernel is not running, and the range lies within the output and its copy.
            let (output, copy) = unsafe {
                (
                    std::slice::from_raw_parts_mut(o.ptr.add(offset), bytes),
                    std::slice::from_raw_parts(o.copy_ptr.add(offset), bytes),
                )
            };
            parallel_copy(output, copy);
        }
    }
}

impl Drop for OutputBackups {
    fn drop(&mut self) {
        if !self.results_kept {
            self.restore();
        }
        let mut spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner);
        for output in self.outputs.drain(..) {
            if spare.len() < KEPT_BUFFERS {
                spare.push(output.copy);
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

/// Copies `bytes` from `from` to `to` (not overlapping) with stores that bypass the cache where
/// the CPU has them: the saved bytes are read back only if the launch fails, and ordinary stores
/// would first read each line of the buffer into the cache (a third more memory traffic than
/// the kernel's own for an update like saxpy).
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`.
unsafe fn copy_around_cache(from: *const u8, to: *mut u8, bytes: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        // Plain copies up to the first 16-byte boundary of `to` and after the last.
        let head = to.align_offset(16).min(bytes);
        let lines = (bytes - head) / 16;
        // SAFETY: the caller's ranges; the streamed part is 16-byte aligned in `to` (loads are
        // unaligned), and the fence orders the streaming stores before the task's later work.
        unsafe {
            std::ptr::copy_nonoverlapping(from, to, head);
            for k in 0..lines {
                let at = head + 16 * k;
                let line = _mm_loadu_si128(from.add(at) as *const __m128i);
                _mm_stream_si128(to.add(at) as *mut __m128i, line);
            }
            let done = head + 16 * lines;
            std::ptr::copy_nonoverlapping(from.add(done), to.add(done), bytes - done);
            _mm_sfence();
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(from, to, bytes)
    };
}

fn parallel_copy(to: &mut [u8], from: &[u8]) {
    to.par_chunks_mut(COPY_CHUNK)
        .zip(from.par_chunks(COPY_CHUNK))
        .for_each(|(to, from)| to.copy_from_slice(from));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `kernel` on an output with backups, which it saves first (as a plugin does), and
    /// writes everything it saved; the output afterwards.
    fn launch(keep: bool, kernel: impl Fn(&OutputBackups, *mut u8, usize)) -> (Vec<u8>, Vec<u8>) {
        let mut output: Vec<u8> = (0..3 * COPY_CHUNK + 5).map(|i| i as u8).collect();
        let before = output.clone();
        let (ptr, len) = (output.as_mut_ptr(), output.len());
        let mut backups = OutputBackups::default();
        // SAFETY: `output` is used through `ptr` alone until `backups` is dropped below.
        unsafe { backups.add(ptr, len) };
        kernel(&backups, ptr, len);
        if keep {
            backups.keep_results();
        } else {
            drop(backups);
        }
        (output, before)
    }

    /// The kernel's writes: bytes `range` of the output tripled.
    fn write(ptr: *mut u8, range: Range<usize>) {
        // SAFETY: within the output, borrowed for the launch (the callers of `launch`).
        let written = unsafe { std::slice::from_raw_parts_mut(ptr.add(range.start), range.len()) };
        written.iter_mut().for_each(|b| *b = b.wrapping_mul(3));
    }

    #[test]
    fn outputs_come_back_unless_the_results_are_kept() {
        for keep in [false, true] {
            let (output, before) = launch(keep, |backups, ptr, len| {
                backups.save_all();
                write(ptr, 0..len);
            });
            let tripled: Vec<u8> = before.iter().map(|b| b.wrapping_mul(3)).collect();
            assert_eq!(output, if keep { tripled } else { before });
        }
    }

    /// Runs saved one by one come back, and only they: the rest was not written.
    #[test]
    fn saved_runs_come_back() {
        let runs = [3..9, 9..10, COPY_CHUNK..2 * COPY_CHUNK + 7];
        let (output, before) = launch(false, |backups, ptr, _| {
            for run in runs.clone() {
                // SAFETY: distinct runs, saved before they are written.
                unsafe { backups.save(ptr as usize + run.start, run.len()) };
                write(ptr, run);
            }
            // Past the end of every output: not saved, and nothing to restore.
            // SAFETY: no output's bytes.
            unsafe { backups.save(usize::MAX / 2, 4) };
        });
        assert_eq!(output, before);
    }

    /// A failed launch on the host plugin, whose tasks save what they write.
    mod on_the_host {
        use super::*;
        use crate::plugins::host::{HostBackend, THREADS_PER_TASK};
        use crate::plugins::{Backend, Code, HostThread, HostThreads, PackedArgs, Shape};
        use crate::{Error, Result};
        use offload_kernel::host_context::ThreadRange;
        use offload_kernel::{Dim3, ThreadSlice};
        use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
        use std::sync::{Mutex, PoisonError};

        /// The output of `ranges_over_output`'s kernels, and its length.
        static OUTPUT: AtomicPtr<u32> = AtomicPtr::new(std::ptr::null_mut());
        static OUTPUT_LEN: AtomicUsize = AtomicUsize::new(0);
        /// Held through a launch over `OUTPUT`: the tests run at the same time.
        static OUTPUT_IN_USE: Mutex<()> = Mutex::new(());

        /// Launches `threads` over a fresh output of 2 elements per thread (as `launch` from the
        /// layer above: restartable, the output in `OutputBackups`); the result and the output.
        fn ranges_over_output(threads: HostThreads) -> (Result<()>, Vec<u32>, Vec<u32>) {
            unsafe fn one_thread(_: &PackedArgs) {}
            ranges_over_output_on_scheduler_with(threads, one_thread)
        }

        /// As `ranges_over_output`, with `thread` the one-thread build that the block scheduler
        /// runs.
        fn ranges_over_output_on_scheduler_with(
            threads: HostThreads,
            thread: HostThread,
        ) -> (Result<()>, Vec<u32>, Vec<u32>) {
            let _in_use = OUTPUT_IN_USE.lock().unwrap_or_else(PoisonError::into_inner);
            // Ten tasks.
            let (grid, block) = (
                Dim3::new(10, 1, 1),
                Dim3::new(THREADS_PER_TASK as u32, 1, 1),
            );
            let mut out: Vec<u32> = (0..2 * 10 * THREADS_PER_TASK as u32).collect();
            let before = out.clone();
            OUTPUT.store(out.as_mut_ptr(), Ordering::Relaxed);
            OUTPUT_LEN.store(out.len(), Ordering::Relaxed);
            let host = HostBackend::new();
            let image = host
                .load_image(&Code::Host {
                    name: "ranges",
                    thread,
                    threads: Some(threads),
                    independent: true,
                })
                .unwrap();
            let entry = host.find_entry(image, "ranges").unwrap();
            let shape = Shape {
                grid,
                block,
                dynamic_shared: 0,
            };
            let mut backups = OutputBackups::default();
            // SAFETY: `out` is reached through its address alone until `backups` is dropped.
            unsafe { backups.add(out.as_mut_ptr() as *mut u8, out.len() * 4) };
            // SAFETY: the builds read no parameters; the output lives through the launch.
            let ran =
                unsafe { host.launch_restartable(entry, shape, &PackedArgs::default(), &backups) };
            if ran.is_ok() {
                backups.keep_results();
            } else {
                drop(backups);
            }
            (ran, out, before)
        }

        /// Each thread's elements set to 7 (`iter_mine`, or `at` with `unnamed`), the owner of
        /// the element past the middle panicking after its writes when `fail`.
        fn fill(range: ThreadRange, unnamed: bool, fail: bool) {
            let (ptr, len) = (
                OUTPUT.load(Ordering::Relaxed),
                OUTPUT_LEN.load(Ordering::Relaxed),
            );
            offload_kernel::host_context::run_threads(range, true, || {
                // SAFETY: the output of `ranges_over_output`, borrowed for the launch.
                let mut out = unsafe { ThreadSlice::from_raw_parts(ptr, len) };
                let mine: Vec<usize> = out
                    .iter_mine()
                    .map(|(i, e)| {
                        *e = 7;
                        i
                    })
                    .collect();
                if unnamed {
                    // SAFETY: this thread's own elements.
                    mine.iter().for_each(|&i| *unsafe { out.at(i) } = 7);
                }
                if fail && mine.contains(&(len / 2 + 1)) {
                    panic!("the element past the middle");
                }
            });
        }

        /// A failed launch puts back exactly what its tasks saved, also after a task reached the
        /// output unnamed (`at`) and the launch started over with a whole backup.
        #[test]
        fn failed_range_launches_leave_the_output_as_it_was() {
            unsafe fn named(_: &PackedArgs, range: ThreadRange) {
                fill(range, false, true);
            }
            unsafe fn unnamed(_: &PackedArgs, range: ThreadRange) {
                fill(range, true, true);
            }
            for threads in [named as HostThreads, unnamed] {
                let (ran, out, before) = ranges_over_output(threads);
                match ran {
                    Err(Error::Driver { message, .. }) => {
                        assert_eq!(message, "panicked: the element past the middle")
                    }
                    other => panic!("expected a driver error, got {other:?}"),
                }
                assert!(out == before, "the output as it was");
            }
            unsafe fn succeeds(_: &PackedArgs, range: ThreadRange) {
                fill(range, true, false);
            }
            let (ran, out, _) = ranges_over_output(succeeds);
            ran.unwrap();
            assert!(out.iter().all(|&e| e == 7));
        }

        /// A kernel whose image calls it independent (as a stub's PTX would, one that left the
        /// body out) but whose threads meet at a barrier: the launch leaves the plain calls,
        /// puts the output back and runs on the block scheduler.
        #[test]
        #[cfg_attr(miri, ignore = "Miri cannot switch stacks")]
        fn a_barrier_in_a_kernel_said_independent_moves_the_launch_to_the_scheduler() {
            fn fill_then_sync() {
                let (ptr, len) = (
                    OUTPUT.load(Ordering::Relaxed),
                    OUTPUT_LEN.load(Ordering::Relaxed),
                );
                // SAFETY: the output of `ranges_over_output`, borrowed for the launch.
                let mut out = unsafe { ThreadSlice::from_raw_parts(ptr, len) };
                out.iter_mine().for_each(|(_, e)| *e += 1);
                offload_kernel::sync_threads();
            }
            unsafe fn thread(_: &PackedArgs) {
                fill_then_sync();
            }
            unsafe fn threads(_: &PackedArgs, range: ThreadRange) {
                offload_kernel::host_context::run_threads(range, true, fill_then_sync);
            }
            let (ran, out, before) = ranges_over_output_on_scheduler_with(threads, thread);
            ran.unwrap();
            // Once each: what the plain calls had added was put back first.
            let diff: Vec<i64> = out
                .iter()
                .zip(&before)
                .map(|(&e, &b)| e as i64 - b as i64)
                .collect();
            assert!(diff.iter().all(|&d| d == 1), "{diff:?}");
        }
    }
}
