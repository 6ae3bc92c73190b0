//! How the host backend saves a launch's outputs inside the work itself: while a range of threads
//! runs as one call, each ownership loop names the output elements it is about to write (its
//! runs of consecutive indices) before writing them, and the host backend copies those elements
//! aside, in cache, just before the kernel reads and overwrites them. A failed launch puts back
//! what was saved. Ways into an output that do not name their elements (raw pointers, `at`) end
//! the call with [`NeedsWholeBackup`]: the backend puts back what was saved, copies the whole
//! outputs and runs the launch again. On GPUs nothing is saved: these are no-ops.

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod host {
    use crate::index::GridStride;
    use core::cell::Cell;

    /// The unwind payload of a kernel that reached an output in a way that names no elements
    /// (a raw pointer, `ThreadSlice::at`) while its elements were being saved run by run: the
    /// host backend puts the outputs back, saves them whole and runs the launch again.
    #[derive(Debug)]
    pub struct NeedsWholeBackup;

    std::thread_local! {
        static SAVE: Cell<Option<*const dyn Fn(*const u8, usize)>> = const { Cell::new(None) };
    }

    /// Run `f` (a range of threads as one call) with `save(address, bytes)` called for every
    /// run of output elements before it is written.
    pub fn with_output_saving<R>(save: &dyn Fn(*const u8, usize), f: impl FnOnce() -> R) -> R {
        // SAFETY: only the lifetime is erased; the pointer is removed from the thread-local
        // before `save` goes out of scope (the guard below, also on unwinding).
        let erased: *const (dyn Fn(*const u8, usize) + 'static) =
            unsafe { core::mem::transmute(save) };
        struct Restore(Option<*const dyn Fn(*const u8, usize)>);
        impl Drop for Restore {
            fn drop(&mut self) {
                SAVE.with(|s| s.set(self.0));
            }
        }
        let _restore = Restore(SAVE.with(|s| s.replace(Some(erased))));
        f()
    }

    /// Whether this call's writes must be named first (`with_output_saving` runs).
    #[inline(always)]
    pub(crate) fn saving() -> bool {
        SAVE.with(|s| s.get()).is_some()
    }

    /// Elements `start..end` of the output at `ptr` are about to be written.
    #[inline(always)]
    fn save_elements<T>(ptr: *mut T, start: usize, end: usize) {
        if let Some(save) = SAVE.with(|s| s.get()) {
            let size = core::mem::size_of::<T>();
            // SAFETY: installed by `with_output_saving`, whose frame is below this one.
            unsafe { (*save)(ptr.wrapping_add(start) as *const u8, (end - start) * size) };
        }
    }

    /// The elements of the output at `ptr` that `indices` will yield are about to be written.
    #[inline(always)]
    pub(crate) fn before_writing<T>(ptr: *mut T, indices: &GridStride) {
        if saving() {
            indices.for_each_run(|start, end| save_elements(ptr, start, end));
        }
    }

    /// Elements `start..end` of the output at `ptr`, numbered `start..end` by an ownership loop
    /// of its own (`map` turns a run of its numbers into runs of element indices).
    #[inline(always)]
    pub(crate) fn before_writing_mapped<T>(
        ptr: *mut T,
        indices: &GridStride,
        map: impl Fn(usize, usize, &mut dyn FnMut(usize, usize)),
    ) {
        if saving() {
            indices
                .for_each_run(|start, end| map(start, end, &mut |a, b| save_elements(ptr, a, b)));
        }
    }

    /// An output is reached in a way that names no elements: unwinds with
    /// [`NeedsWholeBackup`] while elements are saved run by run.
    #[inline(always)]
    pub(crate) fn unnamed_access() {
        if saving() {
            needs_whole_backup();
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn needs_whole_backup() -> ! {
        // `resume_unwind`: no panic hook, so no message on stderr for what is not an error.
        std::panic::resume_unwind(std::boxed::Box::new(NeedsWholeBackup))
    }
}
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub(crate) use host::{
    before_writing, before_writing_mapped, needs_whole_backup, saving, unnamed_access,
};
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use host::{with_output_saving, NeedsWholeBackup};

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
mod device {
    use crate::index::GridStride;

    #[inline(always)]
    pub(crate) fn before_writing<T>(_: *mut T, _: &GridStride) {}

    #[inline(always)]
    pub(crate) fn before_writing_mapped<T>(
        _: *mut T,
        _: &GridStride,
        _: impl Fn(usize, usize, &mut dyn FnMut(usize, usize)),
    ) {
    }

    #[inline(always)]
    pub(crate) fn unnamed_access() {}
}
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
pub(crate) use device::*;

#[cfg(all(test, not(any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod tests {
    use super::*;
    use crate::index::host_context::{run_threads, ThreadRange};
    use crate::nd::ArrayViewMut;
    use crate::{Dim3, ThreadSlice, WideSlice};
    use core::cell::RefCell;
    use std::vec;
    use std::vec::Vec;

    /// Consecutive threads `first..end` of one block of 7, as one call.
    fn range(first: u64, end: u64) -> ThreadRange {
        ThreadRange {
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(7, 1, 1),
            first,
            end,
            warp_size: 32,
            as_one: true,
        }
    }

    /// Runs `body` on `out` (initially all `u32::MAX`) as the ranges `cuts` of 7 threads, each
    /// saving what it names: every element must be named exactly once, while it still holds
    /// its first value, and every written element must have been named.
    fn names_what_it_writes(len: usize, body: impl Fn(*mut u32, usize)) {
        for cuts in [&[0, 7][..], &[0, 3, 7], &[0, 1, 2, 5, 6, 7]] {
            let mut out = vec![u32::MAX; len];
            let base = out.as_mut_ptr();
            let named = RefCell::new(vec![0u32; len]);
            for pair in cuts.windows(2) {
                let save = |address: *const u8, bytes: usize| {
                    let first = (address as usize - base as usize) / 4;
                    for i in first..first + bytes / 4 {
                        // SAFETY: within `out`, which the body does not write meanwhile.
                        assert_eq!(unsafe { *base.add(i) }, u32::MAX, "{i} named after a write");
                        named.borrow_mut()[i] += 1;
                    }
                };
                with_output_saving(&save, || {
                    run_threads(range(pair[0], pair[1]), true, || body(base, len))
                });
            }
            for (i, (&n, &v)) in named.borrow().iter().zip(&out).enumerate() {
                assert_eq!(n, 1, "{cuts:?}: element {i} named {n} times");
                assert_ne!(v, u32::MAX, "{cuts:?}: element {i} not written");
            }
        }
    }

    #[test]
    fn ownership_loops_name_the_elements_they_write_before_writing() {
        names_what_it_writes(40, |out, len| {
            // SAFETY: `out` holds `len` elements, borrowed for the call.
            let mut out = unsafe { ThreadSlice::from_raw_parts(out, len) };
            let (mut low, mut high) = out.split_at(13);
            for (i, e) in low.iter_mine() {
                *e = i as u32;
            }
            for (i, e) in high.slice(..).iter_mine() {
                *e = i as u32;
            }
        });
        names_what_it_writes(35, |out, len| {
            // SAFETY: `out` holds `len` elements, borrowed for the call.
            let out = unsafe { ThreadSlice::from_raw_parts(out, len) };
            for (r, c, e) in ArrayViewMut::from_shape(out, [5, 7]).iter_mine() {
                *e = (r * 7 + c) as u32;
            }
        });
        // 16-byte chunks and unaligned ends: views from element 1 of allocations that 64-bit
        // allocators align to 16 bytes (any alignment is named alike), element 0 written apart.
        let input: Vec<u32> = (0..64).collect();
        names_what_it_writes(61, |out, len| {
            // SAFETY: as above; the two views do not overlap.
            let mut wide = unsafe { WideSlice::from_raw_parts(out.wrapping_add(1), len - 1) };
            wide.update_mine_wide(&input[1..len], |_, x| x);
            // SAFETY: as above.
            let mut first = unsafe { ThreadSlice::from_raw_parts(out, 1) };
            for (_, e) in first.iter_mine() {
                *e = 0;
            }
        });
    }

    /// Raw pointers, `at` and kernels that may not run as one call name no elements: the call
    /// unwinds with `NeedsWholeBackup` while saving, and runs as usual otherwise.
    #[test]
    fn unnamed_ways_into_an_output_need_a_whole_backup() {
        let mut out = vec![0u32; 8];
        let (ptr, len) = (out.as_mut_ptr(), out.len());
        let ways: [&dyn Fn(); 3] = [
            &|| {
                // SAFETY: `out` is borrowed for the calls.
                let _ = unsafe { ThreadSlice::from_raw_parts(ptr, len) }.as_mut_ptr();
            },
            // SAFETY: as above; one thread at a time.
            &|| *unsafe { ThreadSlice::from_raw_parts(ptr, len).at(3) } = 1,
            &|| {},
        ];
        for (k, way) in ways.iter().enumerate() {
            let may_run_as_one = k < 2;
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                with_output_saving(&|_, _| {}, || run_threads(range(0, 7), may_run_as_one, way))
            }));
            assert!(unwound.unwrap_err().is::<NeedsWholeBackup>(), "way {k}");
            run_threads(range(0, 7), may_run_as_one, way);
        }
    }
}
