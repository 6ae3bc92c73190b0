//! How the host backend saves a launch's outputs inside the work itself: while a range of threads
//! runs as one call, each ownership loop names the output elements it is about to write (its
//! runs of consecutive indices) before writing them, and the host backend copies those elements
//! aside, in cache, just before the kernel reads and overwrites them. A failed launch puts back
//! what was saved. Ways into an output that do not name their elements (raw pointers, `at`) end
//! the call with [`NeedsWholeBackup`]: the backend puts back what was saved, copies the whole
//! outputs and runs the launch again. On GPUs nothing is saved: these are no-ops.

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod host {
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

    /// Indices an ownership loop will yield, as runs of consecutive ones (`GridStride`).
    pub(crate) trait Runs {
        /// Each run, in order, as `f(start, end)`.
        fn for_each_run(&self, f: impl FnMut(usize, usize));
    }

    /// The elements of the output at `ptr` that `indices` will yield are about to be written.
    #[inline(always)]
    pub(crate) fn before_writing<T>(ptr: *mut T, indices: &impl Runs) {
        if saving() {
            indices.for_each_run(|start, end| save_elements(ptr, start, end));
        }
    }

    /// Elements `start..end` of the output at `ptr`, numbered `start..end` by an ownership loop
    /// of its own (`map` turns a run of its numbers into runs of element indices).
    #[inline(always)]
    pub(crate) fn before_writing_mapped<T>(
        ptr: *mut T,
        indices: &impl Runs,
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
    before_writing, before_writing_mapped, needs_whole_backup, saving, unnamed_access, Runs,
};
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use host::{with_output_saving, NeedsWholeBackup};

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
mod device {
    // GPUs save nothing: the indices' type needs no way to name its runs there.
    #[inline(always)]
    pub(crate) fn before_writing<T, I>(_: *mut T, _: &I) {}

    #[inline(always)]
    pub(crate) fn before_writing_mapped<T, I>(
        _: *mut T,
        _: &I,
        _: impl Fn(usize, usize, &mut dyn FnMut(usize, usize)),
    ) {
    }

    #[inline(always)]
    pub(crate) fn unnamed_access() {}
}
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
pub(crate) use device::*;
