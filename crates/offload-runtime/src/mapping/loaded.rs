//! The code each device has loaded, kept above the plugins: a kernel's code is chosen and loaded
//! once per device (its crate's device image that the plugin ranks best, or its host build), its
//! entry looked up once, and each image's panic record found through the plugin (a device global)
//! and read after launches. Plugins know nothing of panics: a panicking GPU thread writes the
//! image's `OFFLOAD_PANIC_RECORD` and, through `OFFLOAD_PANIC_FLAG_PTR`, sets a word of pinned
//! host memory, so that a launch without a panic costs one host read.

use crate::mapping::kernel::Kernel;
use crate::plugins::{Backend, Code, DevicePtr, EntryHandle, EntryLimits, ImageHandle};
use crate::{Error, Result};
use offload_kernel::panic_record::PanicRecord;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::size_of;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What one device has loaded.
pub(crate) struct Loaded {
    tables: Mutex<Tables>,
    /// Names what is loaded now, unique in the process: renewed when everything is forgotten
    /// (see `crate::api::prepared`, which keeps entries under it).
    generation: AtomicU64,
}

/// The next generation of any device's loaded code.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(0);

fn new_generation() -> u64 {
    NEXT_GENERATION.fetch_add(1, Ordering::Relaxed)
}

impl Default for Loaded {
    fn default() -> Self {
        Loaded {
            tables: Mutex::default(),
            generation: AtomicU64::new(new_generation()),
        }
    }
}

#[derive(Default)]
struct Tables {
    /// By the address of the code they came from (a `DeviceImage`, or a kernel's host build).
    images: ByAddress<Arc<LoadedImage>>,
    /// By the address of the kernel's descriptor.
    entries: ByAddress<Entry>,
}

/// A map keyed by the address of a `static`, looked up on every launch.
type ByAddress<V> = HashMap<usize, V, BuildHasherDefault<AddressHasher>>;

/// Hashes an address with one multiply: addresses of statics are distinct and chosen by no
/// adversary, so SipHash's protection would only cost time on every launch.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_usize(self.0 as usize ^ b as usize);
        }
    }

    fn write_usize(&mut self, address: usize) {
        let spread = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // Both ends count: the table's index takes the low bits, its tags the high ones.
        self.0 = spread ^ (spread >> 32);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A loaded image.
pub(crate) struct LoadedImage {
    handle: ImageHandle,
    /// `None` for an image without a panic record (a host build, or built without reporting).
    panics: Option<PanicRecords>,
}

/// A kernel entry, ready to launch.
#[derive(Clone)]
pub(crate) struct Entry {
    pub handle: EntryHandle,
    pub limits: EntryLimits,
    pub image: Arc<LoadedImage>,
}

/// An image's panic record on the device, and the pinned host word its panic handler sets.
struct PanicRecords {
    record: DevicePtr,
    /// `None` when the device cannot write host memory: then the record's flag is copied back
    /// after every launch instead.
    flag: Option<HostFlag>,
}

/// One word of pinned host memory that kernels of the device write.
struct HostFlag {
    word: *mut u32,
    /// The plugin that allocated it.
    backend: Arc<dyn Backend>,
}

// SAFETY: the word is pinned host memory owned by the flag; it is read and written under the
// device's launch lock only (see `Device::launch_lock`).
unsafe impl Send for HostFlag {}
// SAFETY: as above.
unsafe impl Sync for HostFlag {}

impl Drop for HostFlag {
    fn drop(&mut self) {
        // SAFETY: allocated by this plugin's `alloc_pinned`; the image that wrote it is unloaded
        // or its device gone, so no launch writes it any more.
        unsafe { self.backend.free_pinned(self.word as *mut u8) };
    }
}

impl Loaded {
    /// The entry of `kernel` on `backend`'s device, loading its code on first use.
    /// `Err(NoImage)` when the device has no code for it or its driver rejects it.
    pub fn entry(&self, backend: &Arc<dyn Backend>, kernel: &'static Kernel) -> Result<Entry> {
        let mut tables = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
        let kernel_key = kernel as *const Kernel as usize;
        if let Some(entry) = tables.entries.get(&kernel_key) {
            return Ok(entry.clone());
        }
        let no_image = |reason: String| Error::NoImage {
            kernel: kernel.name,
            device: backend.name().to_string(),
            reason,
        };
        let rejected = |e: Error| match e {
            Error::Driver { message, .. } => no_image(message),
            other => other,
        };
        let (code, code_key) = choose_code(&**backend, kernel).ok_or_else(|| {
            no_image(match kernel.images.unavailable {
                Some(why) => format!("no device image was built ({why})"),
                None => format!("no image fits {}", backend.target()),
            })
        })?;
        let image = match tables.images.get(&code_key) {
            Some(image) => image.clone(),
            None => {
                let handle = backend.load_image(&code).map_err(rejected)?;
                let image = Arc::new(LoadedImage {
                    handle,
                    panics: PanicRecords::find(backend, handle)?,
                });
                tables.images.insert(code_key, image.clone());
                image
            }
        };
        let handle = backend
            .find_entry(image.handle, kernel.name)
            .map_err(rejected)?;
        let entry = Entry {
            handle,
            limits: backend.entry_limits(handle)?,
            image,
        };
        tables.entries.insert(kernel_key, entry.clone());
        Ok(entry)
    }

    /// Forget everything (the plugin unloaded it: the device was released).
    pub fn clear(&self) {
        let mut tables = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
        self.generation.store(new_generation(), Ordering::Release);
        tables.entries.clear();
        tables.images.clear();
    }

    /// The generation of what is loaded now.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The code of `kernel` that `backend` ranks best, with the address that identifies it. The
/// host build runs ranges of threads without the block model where the kernel's PTX shows its
/// threads never wait for one another (looked up only when the host build is chosen), and tries
/// to elsewhere (see `plugins::host`).
fn choose_code(backend: &dyn Backend, kernel: &'static Kernel) -> Option<(Code<'static>, usize)> {
    let host = Code::Host {
        name: kernel.name,
        thread: kernel.host_thread,
        threads: None,
        independent: false,
    };
    let host_key = &kernel.host_thread as *const _ as usize;
    let images = kernel
        .images
        .images
        .iter()
        .map(|image| (Code::Image(image), image as *const _ as usize));
    let (code, key) = images
        .chain([(host, host_key)])
        .filter_map(|(code, key)| Some((backend.code_rank(&code)?, code, key)))
        .max_by_key(|(rank, ..)| *rank)
        .map(|(_, code, key)| (code, key))?;
    let code = match code {
        Code::Host { name, thread, .. } => Code::Host {
            name,
            thread,
            threads: Some(kernel.host_threads),
            independent: kernel.threads_independent(),
        },
        image => image,
    };
    Some((code, key))
}

impl PanicRecords {
    /// The panic record of a freshly loaded image, with a pinned host flag its panic handler
    /// sets where the device can write one. `None` for an image without the record.
    fn find(backend: &Arc<dyn Backend>, image: ImageHandle) -> Result<Option<PanicRecords>> {
        let Some((record, bytes)) = backend.find_global(image, "OFFLOAD_PANIC_RECORD")? else {
            return Ok(None);
        };
        if bytes != size_of::<PanicRecord>() {
            tracing::warn!(device = %backend.name(), bytes, "the image's panic record has an unknown layout: kernel panics go unreported");
            return Ok(None);
        }
        let flag = match backend.find_global(image, "OFFLOAD_PANIC_FLAG_PTR")? {
            Some((flag_ptr, bytes)) if bytes == size_of::<u64>() => {
                HostFlag::point(backend, flag_ptr)?
            }
            _ => None,
        };
        Ok(Some(PanicRecords { record, flag }))
    }
}

impl HostFlag {
    /// A zeroed pinned word, its device address stored in the image's flag pointer at
    /// `flag_ptr`; `None` when the device cannot have one.
    fn point(backend: &Arc<dyn Backend>, flag_ptr: DevicePtr) -> Result<Option<HostFlag>> {
        let word = match backend.alloc_pinned(size_of::<u32>()) {
            Ok(word) => word as *mut u32,
            Err(e) => {
                tracing::debug!(device = %backend.name(), "no pinned memory ({e}): kernel panics are checked by a copy per launch");
                return Ok(None);
            }
        };
        // Owned from here on, so that it is freed whatever happens below.
        let flag = HostFlag {
            word,
            backend: backend.clone(),
        };
        // SAFETY: a live, aligned allocation of one word.
        unsafe { word.write_volatile(0) };
        let Some(address) = backend.pinned_device_address(word as *mut u8) else {
            return Ok(None);
        };
        // SAFETY: the flag pointer holds 8 bytes; `address` is alive until the synchronize.
        unsafe {
            backend.copy_to_device(flag_ptr, &address.0 as *const u64 as *const u8, 8)?;
        }
        backend.synchronize()?;
        Ok(Some(flag))
    }
}

impl LoadedImage {
    /// Whether launches of its kernels report panics (and so need the device's launch lock from
    /// launch to [`LoadedImage::take_panic`]).
    pub fn reports_panics(&self) -> bool {
        self.panics.is_some()
    }

    /// Once a launch of one of its kernels has completed (`queue` synchronized): whether a thread
    /// of it panicked, as a message naming where. Taking it re-arms the record for the next
    /// launch. Called with the device's launch lock held.
    pub fn take_panic(&self, queue: &dyn Backend) -> Result<Option<String>> {
        let Some(panics) = &self.panics else {
            return Ok(None);
        };
        match &panics.flag {
            // The no-panic path: one read of pinned host memory. The launch completed, so any
            // store the device made to it is visible.
            // SAFETY: the flag is alive; the launch lock is held.
            Some(flag) if unsafe { flag.word.read_volatile() } == 0 => return Ok(None),
            Some(_) => {}
            None => {
                let mut word = 0u32;
                // SAFETY: the record's first word; `word` is alive until the synchronize.
                unsafe {
                    queue.copy_from_device(&mut word as *mut u32 as *mut u8, panics.record, 4)?
                };
                queue.synchronize()?;
                if word == 0 {
                    return Ok(None);
                }
            }
        }
        let mut record = PanicRecord::ZERO;
        let bytes = size_of::<PanicRecord>();
        // SAFETY: `record` holds `bytes` bytes and any bytes are a valid PanicRecord; the device
        // record holds `bytes` (checked at load). Zeroing it, ordered before any later launch on
        // this queue, and the flag arms the record for the next launch.
        unsafe {
            queue.copy_from_device(record.as_bytes_mut().as_mut_ptr(), panics.record, bytes)?;
            queue.fill_zero(panics.record, bytes)?;
        }
        queue.synchronize()?;
        if let Some(flag) = &panics.flag {
            // SAFETY: as above.
            unsafe { flag.word.write_volatile(0) };
        }
        Ok(Some(record.to_string()))
    }
}
