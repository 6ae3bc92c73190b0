//! A GPU plugin for the runtime's own tests: "device memory" is host memory behind fake
//! addresses, launches record their parameters and run nothing, and a memory cap makes
//! allocations fail. It loads images whose target is `"mock"` (and rejects those whose bytes
//! start with `bad`); every image has a panic record and its flag pointer, as the device pass
//! makes them, and a test can make the next launch "panic" by writing a record there. It lets
//! the layers above the plugins (present table, regions, transfers, image caching, panic
//! reporting, trace counters, ordering across streams) be tested on machines without a GPU. Its
//! queues share the device's memory and run nothing, so they are always drained; their events
//! are only counted.

use crate::plugins::code::{Code, EntryHandle, ImageHandle};
use crate::plugins::interface::{
    Backend, BackendKind, DevicePtr, MemoryInfo, NativeQueue, Platform, QueueEvent,
};
use crate::plugins::limits::{EntryLimits, Limits, Shape};
use crate::plugins::packed::PackedArgs;
use crate::{Error, Result};
use offload_kernel::panic_record::PanicRecord;
use offload_kernel::Dim3;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::any::Any;
use std::collections::BTreeMap;
use std::mem::size_of;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The target of the images the mock loads.
pub(crate) const MOCK_TARGET: &str = "mock";

/// The mock device, or one queue of it ([`Backend::new_queue`]): its queues share the device's
/// state, and run nothing, so they are always drained.
pub(crate) struct MockGpu {
    state: Arc<MockState>,
    /// Which plugin it poses as, for which GPU, at which ordinal, with which UUID (discovery
    /// tests).
    pub identity: (BackendKind, Platform, usize, Option<[u8; 16]>),
}

pub(crate) struct MockState {
    /// Live allocations by fake address.
    memory: Mutex<BTreeMap<u64, Vec<u8>>>,
    next: Mutex<u64>,
    /// Allocations larger than this fail with `OutOfMemory`.
    pub capacity: usize,
    /// The parameters of every launch.
    pub launches: Mutex<Vec<PackedArgs>>,
    /// Images loaded so far; an image's handle is its index.
    pub images_loaded: Mutex<usize>,
    /// Per loaded image: its panic record and flag pointer globals.
    globals: Mutex<Vec<(DevicePtr, DevicePtr)>>,
    /// What the next launch writes into its image's panic record.
    panic_next: Mutex<Option<PanicRecord>>,
    /// Whether kernels reach pinned host memory (a panic flag); without, the runtime reads the
    /// panic record after every launch.
    pub maps_pinned: AtomicBool,
    /// Live pinned allocations (address → bytes): panic flags and bounce buffers.
    pinned: Mutex<BTreeMap<usize, usize>>,
    released: AtomicBool,
    /// Events recorded, on any queue.
    pub events: AtomicUsize,
}

impl Deref for MockGpu {
    type Target = MockState;

    fn deref(&self) -> &MockState {
        &self.state
    }
}

impl MockGpu {
    pub fn new(capacity: usize) -> Self {
        MockGpu {
            state: Arc::new(MockState {
                memory: Mutex::new(BTreeMap::new()),
                next: Mutex::new(0x1000),
                capacity,
                launches: Mutex::new(Vec::new()),
                images_loaded: Mutex::new(0),
                globals: Mutex::new(Vec::new()),
                panic_next: Mutex::new(None),
                maps_pinned: AtomicBool::new(true),
                pinned: Mutex::new(BTreeMap::new()),
                released: AtomicBool::new(false),
                events: AtomicUsize::new(0),
            }),
            identity: (BackendKind::Cuda, Platform::Cuda, 0, None),
        }
    }

    /// Allocations the runtime made (not the images' globals).
    pub fn live_allocations(&self) -> usize {
        self.memory.lock().unwrap().len() - 2 * self.globals.lock().unwrap().len()
    }

    /// The bytes at a fake device address (inside an allocation).
    pub fn read(&self, at: DevicePtr, bytes: usize) -> Vec<u8> {
        let mut out = vec![0; bytes];
        self.with(at, |d| out.copy_from_slice(&d[..bytes]));
        out
    }

    /// Make the next launch write `record` into its image's panic record, as a panicking GPU
    /// thread does (and set the host flag the record's flag pointer points at, if any).
    pub fn panic_next_launch(&self, record: PanicRecord) {
        *self.panic_next.lock().unwrap() = Some(record);
    }

    fn with<R>(&self, at: DevicePtr, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut memory = self.memory.lock().unwrap();
        let (&base, data) = memory
            .range_mut(..=at.0)
            .next_back()
            .expect("a live allocation");
        f(&mut data[(at.0 - base) as usize..])
    }

    fn check_live(&self) -> Result<()> {
        if self.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.name().to_string(),
            });
        }
        Ok(())
    }

    fn allocate(&self, bytes: usize) -> DevicePtr {
        let mut next = self.next.lock().unwrap();
        let at = *next;
        *next += bytes as u64 + 0x1000;
        self.memory.lock().unwrap().insert(at, vec![0xAB; bytes]);
        DevicePtr(at)
    }

    fn rejected(&self, operation: &'static str, message: &str) -> Error {
        Error::Driver {
            device: self.name().to_string(),
            operation,
            message: message.to_string(),
        }
    }

    /// What a panicking thread of an image's kernel does to its record and flag.
    fn write_panic(&self, image: usize, record: &PanicRecord) {
        let (record_at, flag_ptr_at) = self.globals.lock().unwrap()[image];
        let mut bytes = *record;
        self.with(record_at, |d| {
            d[..size_of::<PanicRecord>()].copy_from_slice(bytes.as_bytes_mut())
        });
        let flag = u64::from_ne_bytes(self.read(flag_ptr_at, 8).try_into().unwrap());
        if flag != 0 {
            // SAFETY: the runtime pointed the flag pointer at a live word of `alloc_pinned`
            // memory, whose "device address" is its host address here.
            unsafe { (flag as usize as *mut u32).write_volatile(1) };
        }
    }
}

/// Mock pinned memory: zeroed heap pages.
fn pinned_layout(bytes: usize) -> Layout {
    Layout::from_size_align(bytes, 4096).unwrap()
}

impl Backend for MockGpu {
    fn kind(&self) -> BackendKind {
        self.identity.0
    }
    fn platform(&self) -> Platform {
        self.identity.1
    }
    fn uuid(&self) -> Option<[u8; 16]> {
        self.identity.3
    }
    fn name(&self) -> &str {
        "mock GPU"
    }
    fn ordinal(&self) -> usize {
        self.identity.2
    }
    fn limits(&self) -> Limits {
        Limits {
            max_threads_per_block: 1024,
            max_block: Dim3::new(1024, 1024, 64),
            max_grid: Dim3::new(i32::MAX as u32, 65535, 65535),
            multiprocessors: 4,
            threads_per_multiprocessor: 2048,
            max_shared_per_block: 48 * 1024,
        }
    }
    fn memory_is_host(&self) -> bool {
        false
    }
    fn memory_info(&self) -> Result<MemoryInfo> {
        let used: usize = self.memory.lock().unwrap().values().map(Vec::len).sum();
        Ok(MemoryInfo {
            free: self.capacity.saturating_sub(used),
            total: self.capacity,
        })
    }
    fn release(&self) -> Result<()> {
        self.released.store(true, Ordering::Release);
        Ok(())
    }
    fn alloc(&self, requester: &'static str, bytes: usize) -> Result<DevicePtr> {
        self.check_live()?;
        if bytes > self.capacity {
            return Err(Error::OutOfMemory {
                kernel: requester,
                device: self.name().to_string(),
                bytes,
            });
        }
        Ok(self.allocate(bytes))
    }
    unsafe fn free(&self, ptr: DevicePtr) {
        self.memory
            .lock()
            .unwrap()
            .remove(&ptr.0)
            .expect("freed a live allocation");
    }
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()> {
        self.check_live()?;
        // SAFETY: per the trait contract.
        let src = unsafe { std::slice::from_raw_parts(src, bytes) };
        self.with(dst, |d| d[..bytes].copy_from_slice(src));
        Ok(())
    }
    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()> {
        self.check_live()?;
        // SAFETY: per the trait contract.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
        self.with(src, |s| dst.copy_from_slice(&s[..bytes]));
        Ok(())
    }
    unsafe fn fill_zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        self.check_live()?;
        self.with(dst, |d| d[..bytes].fill(0));
        Ok(())
    }
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8> {
        // SAFETY: bytes > 0 (the trait contract).
        let ptr = unsafe { alloc_zeroed(pinned_layout(bytes)) };
        self.pinned.lock().unwrap().insert(ptr as usize, bytes);
        Ok(ptr)
    }
    unsafe fn free_pinned(&self, ptr: *mut u8) {
        let bytes = self.pinned.lock().unwrap().remove(&(ptr as usize));
        let bytes = bytes.expect("freeing pinned memory this mock did not allocate");
        // SAFETY: allocated by `alloc_pinned` with this layout.
        unsafe { dealloc(ptr, pinned_layout(bytes)) };
    }
    fn pinned_device_address(&self, ptr: *mut u8) -> Option<DevicePtr> {
        let maps = self.maps_pinned.load(Ordering::Relaxed);
        maps.then_some(DevicePtr(ptr as usize as u64))
    }
    fn code_rank(&self, code: &Code<'_>) -> Option<u32> {
        match code {
            Code::Image(image) if image.target == MOCK_TARGET => Some(1),
            _ => None,
        }
    }
    fn target(&self) -> String {
        MOCK_TARGET.to_string()
    }
    fn load_image(&self, code: &Code<'static>) -> Result<ImageHandle> {
        self.check_live()?;
        let Code::Image(image) = code else {
            return Err(self.rejected("loading an image", "the mock runs device images only"));
        };
        if image.bytes.starts_with(b"bad") {
            return Err(self.rejected("loading an image", "the mock rejects this image"));
        }
        let record = self.allocate(size_of::<PanicRecord>());
        let flag_ptr = self.allocate(size_of::<u64>());
        self.with(record, |d| d.fill(0));
        self.with(flag_ptr, |d| d.fill(0));
        let mut globals = self.globals.lock().unwrap();
        globals.push((record, flag_ptr));
        *self.images_loaded.lock().unwrap() += 1;
        Ok(ImageHandle(globals.len() as u64 - 1))
    }
    fn find_entry(&self, image: ImageHandle, name: &str) -> Result<EntryHandle> {
        if name.starts_with("missing") {
            return Err(self.rejected("finding a kernel entry", "no such entry"));
        }
        Ok(EntryHandle(image.0))
    }
    fn entry_limits(&self, _entry: EntryHandle) -> Result<EntryLimits> {
        Ok(EntryLimits {
            max_threads_per_block: 512,
            registers: 128,
            static_shared: 1024,
        })
    }
    /// As a GPU with 64 K registers per multiprocessor would say of the entry's 128 a thread.
    fn resident_blocks(
        &self,
        _entry: EntryHandle,
        threads: u32,
        _dynamic_shared: u32,
    ) -> Result<Option<u32>> {
        Ok(Some(65536 / (128 * threads.max(1))))
    }
    fn find_global(&self, image: ImageHandle, name: &str) -> Result<Option<(DevicePtr, usize)>> {
        let (record, flag_ptr) = self.globals.lock().unwrap()[image.0 as usize];
        Ok(match name {
            "OFFLOAD_PANIC_RECORD" => Some((record, size_of::<PanicRecord>())),
            "OFFLOAD_PANIC_FLAG_PTR" => Some((flag_ptr, size_of::<u64>())),
            _ => None,
        })
    }
    unsafe fn launch(&self, entry: EntryHandle, _shape: Shape, args: &PackedArgs) -> Result<()> {
        self.check_live()?;
        self.launches.lock().unwrap().push(args.clone());
        if let Some(record) = self.panic_next.lock().unwrap().take() {
            self.write_panic(entry.0 as usize, &record);
        }
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        self.check_live()
    }
    fn new_queue(&self) -> Result<Arc<dyn Backend>> {
        self.check_live()?;
        Ok(Arc::new(MockGpu {
            state: self.state.clone(),
            identity: self.identity,
        }))
    }
    fn native_queue(&self) -> Option<NativeQueue> {
        None
    }
    fn record_event(&self) -> Result<Box<dyn QueueEvent>> {
        self.check_live()?;
        self.events.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(MockEvent))
    }
    fn wait_event(&self, event: &dyn QueueEvent) -> Result<()> {
        self.check_live()?;
        event
            .as_any()
            .downcast_ref::<MockEvent>()
            .map(|_| ())
            .ok_or_else(|| self.rejected("waiting for an event", "not a mock event"))
    }
}

/// A mark in a mock queue: complete at once, as the mock runs nothing.
struct MockEvent;

impl QueueEvent for MockEvent {
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn elapsed_since(&self, _start: &dyn QueueEvent) -> Result<Duration> {
        Ok(Duration::ZERO)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
