//! What a plugin loads and launches: a kernel's code as plain data, and the plugin's handles of
//! what it loaded.

use crate::plugins::image::DeviceImage;
use crate::plugins::packed::PackedArgs;
use offload_kernel::host_context::ThreadRange;
use std::sync::Mutex;

/// One form of a kernel's code that the layer above offers a plugin.
#[derive(Clone, Copy, Debug)]
pub enum Code<'a> {
    /// A device image embedded by the build pass (PTX, cubin, …), holding all kernels of a crate.
    Image(&'a DeviceImage),
    /// A kernel's host build: an image with one entry, `name`, whose every call runs one GPU
    /// thread on the host CPU.
    Host {
        /// The kernel's name.
        name: &'static str,
        /// Runs one GPU thread of the kernel.
        thread: HostThread,
        /// Runs a range of the launch's threads one after the other, with no block model: it
        /// gives the same results as `thread` for kernels whose threads never wait for one
        /// another (no barrier, warp operation or shared memory), and unwinds with
        /// `NeedsBlockModel` in a thread that reaches one.
        threads: Option<HostThreads>,
        /// Whether the kernel's threads are known never to wait for one another (from its PTX);
        /// else `threads` is tried only where the launch can be run again.
        independent: bool,
    },
}

/// A plugin's handle of an image it loaded (a CUDA module, …), meaningful to that plugin only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageHandle(pub u64);

/// A plugin's handle of a kernel entry in a loaded image (a CUDA function, …), meaningful to that
/// plugin only, valid until the device is released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHandle(pub u64);

/// A kernel's host build: runs one GPU thread (its ids set by the scheduler) with the launch's
/// packed parameters.
///
/// # Safety
/// The parameters are those of a launch of this kernel, as its launcher packs them, and every
/// thread of the launch runs through the host plugin's scheduler.
pub type HostThread = unsafe fn(&PackedArgs);

/// A kernel's host build for threads that never wait for one another: runs the threads of
/// `range` in turn, each as a plain call with its ids set.
///
/// # Safety
/// As [`HostThread`], and `range` lies within the launch's grid.
pub type HostThreads = unsafe fn(&PackedArgs, ThreadRange);

/// A kernel name that lives for the process, each distinct name stored once (the errors of
/// launches name their kernel by `&'static str`).
pub(crate) fn interned(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&known) = names.iter().find(|&&n| n == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(leaked);
    leaked
}
