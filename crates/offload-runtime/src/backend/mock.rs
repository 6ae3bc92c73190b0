//! A GPU plugin for the runtime's own tests: "device memory" is host memory behind fake
//! addresses, launches record their parameters and run nothing, and a memory cap makes
//! allocations fail. It lets the mapping logic (present table, regions, transfers, trace
//! counters) be tested on machines without a GPU.

use super::{Backend, BackendKind, DevicePtr, MemoryInfo, Param, Platform, QueueEvent};
use crate::kernel::Kernel;
use crate::launch::{Limits, Shape};
use crate::{Error, Result};
use offload_kernel::Dim3;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub(crate) struct MockGpu {
    /// Live allocations by fake address.
    memory: Mutex<BTreeMap<u64, Vec<u8>>>,
    next: Mutex<u64>,
    /// Allocations larger than this fail with `OutOfMemory`.
    pub capacity: usize,
    /// The word parameters of every launch.
    pub launches: Mutex<Vec<Vec<u64>>>,
    lock: Mutex<()>,
    released: AtomicBool,
    /// Which plugin it poses as, for GPU, at which ordinal, with which UUID (discovery tests).
    pub identity: (BackendKind, Platform, usize, Option<[u8; 16]>),
}

impl MockGpu {
    pub fn new(capacity: usize) -> Self {
        MockGpu {
            memory: Mutex::new(BTreeMap::new()),
            next: Mutex::new(0x1000),
            capacity,
            launches: Mutex::new(Vec::new()),
            lock: Mutex::new(()),
            released: AtomicBool::new(false),
            identity: (BackendKind::Cuda, Platform::Cuda, 0, None),
        }
    }

    pub fn live_allocations(&self) -> usize {
        self.memory.lock().unwrap().len()
    }

    /// The bytes at a fake device address (inside an allocation).
    pub fn read(&self, at: DevicePtr, bytes: usize) -> Vec<u8> {
        let memory = self.memory.lock().unwrap();
        let (&base, data) = memory
            .range(..=at.0)
            .next_back()
            .expect("a live allocation");
        let offset = (at.0 - base) as usize;
        data[offset..offset + bytes].to_vec()
    }

    fn with<R>(&self, at: DevicePtr, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut memory = self.memory.lock().unwrap();
        let (&base, data) = memory
            .range_mut(..=at.0)
            .next_back()
            .expect("a live allocation");
        f(&mut data[(at.0 - base) as usize..])
    }
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
    fn alloc(&self, kernel: &'static str, bytes: usize) -> Result<DevicePtr> {
        if self.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.name().to_string(),
            });
        }
        if bytes > self.capacity {
            return Err(Error::OutOfMemory {
                kernel,
                device: self.name().to_string(),
                bytes,
            });
        }
        let mut next = self.next.lock().unwrap();
        let at = *next;
        *next += bytes as u64 + 0x1000;
        self.memory.lock().unwrap().insert(at, vec![0xAB; bytes]);
        Ok(DevicePtr(at))
    }
    unsafe fn free(&self, ptr: DevicePtr) {
        self.memory
            .lock()
            .unwrap()
            .remove(&ptr.0)
            .expect("freed a live allocation");
    }
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()> {
        // SAFETY: per the trait contract.
        let src = unsafe { std::slice::from_raw_parts(src, bytes) };
        self.with(dst, |d| d[..bytes].copy_from_slice(src));
        Ok(())
    }
    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: per the trait contract.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
        self.with(src, |s| dst.copy_from_slice(&s[..bytes]));
        Ok(())
    }
    unsafe fn fill_zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        self.with(dst, |d| d[..bytes].fill(0));
        Ok(())
    }
    fn launch(&self, _kernel: &Kernel, _shape: Shape, params: &[Param]) -> Result<()> {
        let words = params
            .iter()
            .filter_map(|p| match p {
                Param::Word(w) => Some(*w),
                Param::Value { .. } => None,
            })
            .collect();
        self.launches.lock().unwrap().push(words);
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn take_panic(&self, _kernel: &Kernel) -> Result<Option<String>> {
        Ok(None)
    }
    fn launch_lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap()
    }
    fn new_queue(&self) -> Result<Arc<dyn Backend>> {
        Err(unsupported())
    }
    fn record_event(&self) -> Result<Box<dyn QueueEvent>> {
        Err(unsupported())
    }
    fn wait_event(&self, _event: &dyn QueueEvent) -> Result<()> {
        Err(unsupported())
    }
    fn alloc_pinned(&self, _bytes: usize) -> Result<*mut u8> {
        Err(unsupported())
    }
    unsafe fn free_pinned(&self, _ptr: *mut u8) {
        unreachable!("the mock GPU never allocates pinned memory")
    }
}

/// Streams and pinned memory are not what the mock is for.
fn unsupported() -> Error {
    Error::NoDevice("the mock GPU has a single queue and no pinned memory".to_string())
}
