//! The plugin glue: one OpenCL device behind [`Backend`], each instance with an in-order queue of
//! its own. Memory is USM device memory; copies are blocking (`clEnqueueMemcpyINTEL` with
//! `blocking = true`), so pageable host memory needs no staging.

use crate::plugins::code::{interned, Code, EntryHandle, ImageHandle};
use crate::plugins::interface::{
    Backend, BackendKind, DevicePtr, MemoryInfo, NativeQueue, Platform, QueueEvent,
};
use crate::plugins::limits::{EntryLimits, Limits, Shape};
use crate::plugins::opencl::event::ClEvent;
use crate::plugins::opencl::platform::ClPlatform;
use crate::plugins::opencl::program;
use crate::plugins::opencl::sys::{self, Handle};
use crate::plugins::packed::PackedArgs;
use crate::{Error, Result};
use offload_kernel::Dim3;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The alignment of device allocations (the trait's 256 bytes).
const ALIGNMENT: u32 = 256;
/// Local memory the hidden shared-memory parameter gets at least (OpenCL refuses 0 bytes).
const MIN_LOCAL_BYTES: usize = 16;

/// An OpenCL device with a queue of its own; [`Backend::new_queue`] gives more.
pub struct OpenClBackend {
    shared: Arc<Shared>,
    queue: Handle,
}

/// What all queues of a device share.
struct Shared {
    platform: Arc<ClPlatform>,
    device: Handle,
    name: String,
    ordinal: usize,
    uuid: Option<[u8; 16]>,
    limits: Limits,
    total_memory: usize,
    /// The sub-group widths the device runs (`CL_DEVICE_SUB_GROUP_SIZES_INTEL`).
    sub_group_sizes: Vec<usize>,
    /// Device allocations not yet freed, and their sizes (OpenCL has no free-memory query).
    allocations: Mutex<HashMap<u64, usize>>,
    /// Every image built, by `ImageHandle`.
    programs: Mutex<Vec<Program>>,
    /// Every kernel entry found, by `EntryHandle`. Its lock also orders the setting of a
    /// kernel's arguments and its launch (an OpenCL kernel object holds its arguments).
    entries: Mutex<Vec<Entry>>,
    released: AtomicBool,
    /// Every live queue of the device (addresses of `cl_command_queue`s), for `release` to drain.
    queues: Mutex<Vec<usize>>,
}

/// A built program.
struct Program {
    handle: Handle,
    /// Kernels that require a sub-group width, with it (offload's warp kernels: 32).
    sub_groups: Vec<(String, u32)>,
}

/// A kernel entry of a built program.
struct Entry {
    kernel: Handle,
    image: u64,
    name: &'static str,
    /// The sub-group width it requires, if any.
    sub_group: Option<u32>,
    limits: EntryLimits,
}

// SAFETY: OpenCL objects are usable from any thread (OpenCL 1.1 and later), except that setting
// a kernel's arguments and enqueuing it must not interleave with another thread's: both happen
// under the `entries` lock.
unsafe impl Send for Shared {}
// SAFETY: as for `Send`.
unsafe impl Sync for Shared {}
// SAFETY: the queue is a thread-safe OpenCL object; the rest is `Shared`.
unsafe impl Send for OpenClBackend {}
// SAFETY: as for `Send`.
unsafe impl Sync for OpenClBackend {}

/// The devices of every platform that take SPIR-V 1.4 and have USM (CPU devices only when
/// `cpus`), and why each other device was skipped.
///
/// # Safety
/// `library` is the opened ICD loader.
pub(crate) unsafe fn open_all(
    library: &'static sys::Library,
    cpus: bool,
) -> (Vec<OpenClBackend>, Vec<String>) {
    let api = &library.api;
    let (mut found, mut skipped) = (Vec::new(), Vec::new());
    let mut platforms = [null_mut(); 16];
    let mut count = 0;
    // SAFETY: at most 16 platforms are written to the array.
    let status = unsafe { (api.clGetPlatformIDs)(16, platforms.as_mut_ptr(), &mut count) };
    if let Err(e) = sys::check("clGetPlatformIDs", status) {
        return (found, vec![e]);
    }
    for &platform in &platforms[..(count as usize).min(16)] {
        let mut devices = [null_mut(); 16];
        let mut n = 0;
        // SAFETY: at most 16 devices are written to the array.
        let status = unsafe {
            (api.clGetDeviceIDs)(
                platform,
                sys::DEVICE_TYPE_ALL,
                16,
                devices.as_mut_ptr(),
                &mut n,
            )
        };
        if status != 0 {
            continue;
        }
        let mut chosen = Vec::new();
        for &device in &devices[..(n as usize).min(16)] {
            // SAFETY: a device of this loader.
            match unsafe { usable(api, device, cpus) } {
                Ok(()) => chosen.push(device),
                Err(why) => skipped.push(why),
            }
        }
        if chosen.is_empty() {
            continue;
        }
        // SAFETY: a platform of this loader.
        let usm = match unsafe { sys::Usm::load(api, platform) } {
            Ok(usm) => usm,
            Err(why) => {
                skipped.push(why);
                continue;
            }
        };
        let mut status = 0;
        // SAFETY: devices of one platform; no callback.
        let context = unsafe {
            (api.clCreateContext)(
                null(),
                chosen.len() as u32,
                chosen.as_ptr(),
                null(),
                null_mut(),
                &mut status,
            )
        };
        if let Err(why) = sys::check("clCreateContext", status) {
            skipped.push(why);
            continue;
        }
        let platform = Arc::new(ClPlatform {
            library,
            usm,
            context,
        });
        for device in chosen {
            // SAFETY: a device of the platform's context.
            match unsafe { OpenClBackend::open(platform.clone(), device, found.len()) } {
                Ok(backend) => found.push(backend),
                Err(why) => skipped.push(why),
            }
        }
    }
    (found, skipped)
}

/// `Ok` when the plugin can use `device`, else why not.
///
/// # Safety
/// `device` is a device of `api`.
unsafe fn usable(api: &sys::Api, device: Handle, cpus: bool) -> std::result::Result<(), String> {
    // SAFETY: the contract.
    unsafe {
        let name = sys::device_string(api, device, sys::DEVICE_NAME)?;
        let il = sys::device_string(api, device, sys::DEVICE_IL_VERSION).unwrap_or_default();
        if !il.contains(program::IL_VERSION) {
            return Err(format!(
                "{name}: takes no {} (IL versions: {il:?})",
                program::IL_VERSION
            ));
        }
        let extensions = sys::device_string(api, device, sys::DEVICE_EXTENSIONS)?;
        if !extensions.contains("cl_intel_unified_shared_memory") {
            return Err(format!("{name}: no cl_intel_unified_shared_memory"));
        }
        let kind = sys::device_number(api, device, sys::DEVICE_TYPE)?;
        if kind & sys::DEVICE_TYPE_CPU != 0 && !cpus {
            return Err(format!(
                "{name}: a CPU device, offered only with OFFLOAD_BACKEND=opencl"
            ));
        }
    }
    Ok(())
}

/// An in-order queue with profiling (for event timing) on `device`.
///
/// # Safety
/// `device` is in the platform's context.
unsafe fn create_queue(
    platform: &ClPlatform,
    device: Handle,
) -> std::result::Result<Handle, String> {
    let properties = [sys::QUEUE_PROPERTIES, sys::QUEUE_PROFILING_ENABLE, 0];
    let mut status = 0;
    // SAFETY: the contract; the property list is zero-terminated.
    let queue = unsafe {
        (platform.api().clCreateCommandQueueWithProperties)(
            platform.context,
            device,
            properties.as_ptr(),
            &mut status,
        )
    };
    sys::check("clCreateCommandQueueWithProperties", status)?;
    Ok(queue)
}

impl OpenClBackend {
    /// # Safety
    /// `device` is in the platform's context.
    unsafe fn open(
        platform: Arc<ClPlatform>,
        device: Handle,
        ordinal: usize,
    ) -> std::result::Result<OpenClBackend, String> {
        let api = platform.api();
        // SAFETY: the contract: every query is of a live device.
        let (name, limits, total_memory, sub_group_sizes, uuid, queue) = unsafe {
            let number = |param| sys::device_number(api, device, param).map(|n| n as u32);
            let sizes = sys::device_sizes(api, device, sys::DEVICE_MAX_WORK_ITEM_SIZES)?;
            let size = |i: usize| sizes.get(i).map_or(1, |&s| s.min(u32::MAX as usize) as u32);
            let max_threads = number(sys::DEVICE_MAX_WORK_GROUP_SIZE)?;
            let limits = Limits {
                max_threads_per_block: max_threads,
                max_block: Dim3 {
                    x: size(0),
                    y: size(1),
                    z: size(2),
                },
                // OpenCL bounds the grid only by size_t: CUDA's limits, which launches meet
                // everywhere.
                max_grid: Dim3 {
                    x: i32::MAX as u32,
                    y: 65_535,
                    z: 65_535,
                },
                multiprocessors: number(sys::DEVICE_MAX_COMPUTE_UNITS)?.max(1),
                threads_per_multiprocessor: max_threads,
                max_shared_per_block: number(sys::DEVICE_LOCAL_MEM_SIZE)?,
            };
            let uuid = sys::device_info(api, device, sys::DEVICE_UUID)
                .ok()
                .and_then(|b| <[u8; 16]>::try_from(b.as_slice()).ok());
            let kind = match sys::device_number(api, device, sys::DEVICE_TYPE)? {
                t if t & sys::DEVICE_TYPE_CPU != 0 => "CPU",
                t if t & sys::DEVICE_TYPE_GPU != 0 => "GPU",
                _ => "device",
            };
            (
                format!(
                    "{} (OpenCL {kind} {ordinal})",
                    sys::device_string(api, device, sys::DEVICE_NAME)?
                ),
                limits,
                sys::device_number(api, device, sys::DEVICE_GLOBAL_MEM_SIZE)? as usize,
                sys::device_sizes(api, device, sys::DEVICE_SUB_GROUP_SIZES).unwrap_or_default(),
                uuid,
                create_queue(&platform, device)?,
            )
        };
        Ok(OpenClBackend {
            shared: Arc::new(Shared {
                platform,
                device,
                name,
                ordinal,
                uuid,
                limits,
                total_memory,
                sub_group_sizes,
                allocations: Mutex::new(HashMap::new()),
                programs: Mutex::new(Vec::new()),
                entries: Mutex::new(Vec::new()),
                released: AtomicBool::new(false),
                queues: Mutex::new(vec![queue as usize]),
            }),
            queue,
        })
    }

    fn platform(&self) -> &ClPlatform {
        &self.shared.platform
    }

    fn api(&self) -> &sys::Api {
        self.shared.platform.api()
    }

    /// The gate of every operation that runs something: a released device says so.
    fn live(&self) -> Result<()> {
        if self.shared.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.shared.name.clone(),
            });
        }
        Ok(())
    }

    fn failed(&self, operation: &'static str) -> impl Fn(String) -> Error + '_ {
        move |message| Error::Driver {
            device: self.shared.name.clone(),
            operation,
            message,
        }
    }

    fn allocations(&self) -> MutexGuard<'_, HashMap<u64, usize>> {
        self.shared
            .allocations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn programs(&self) -> MutexGuard<'_, Vec<Program>> {
        self.shared
            .programs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn entries(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.shared
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// A blocking USM copy of `bytes` bytes.
    ///
    /// # Safety
    /// Both ranges are valid for `bytes` bytes (host memory, or USM memory of this context).
    unsafe fn memcpy(&self, dst: *mut c_void, src: *const c_void, bytes: usize) -> Result<()> {
        self.live()?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the contract; blocking, so nothing is read or written after the return.
        let status = unsafe {
            (self.platform().usm.memcpy)(self.queue, 1, dst, src, bytes, 0, null(), null_mut())
        };
        sys::check("clEnqueueMemcpyINTEL", status).map_err(self.failed("copying memory"))
    }
}

impl Backend for OpenClBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::OpenCl
    }

    fn platform(&self) -> Platform {
        Platform::OpenCl
    }

    fn uuid(&self) -> Option<[u8; 16]> {
        self.shared.uuid
    }

    fn name(&self) -> &str {
        &self.shared.name
    }

    fn ordinal(&self) -> usize {
        self.shared.ordinal
    }

    fn limits(&self) -> Limits {
        self.shared.limits
    }

    fn memory_is_host(&self) -> bool {
        false
    }

    /// OpenCL reports no free memory: the total less what this plugin has allocated.
    fn memory_info(&self) -> Result<MemoryInfo> {
        self.live()?;
        let used = self.allocations().values().sum();
        Ok(MemoryInfo::less_used(self.shared.total_memory, used))
    }

    fn alloc(&self, requester: &'static str, bytes: usize) -> Result<DevicePtr> {
        self.live()?;
        let mut status = 0;
        // SAFETY: a device of the context; no properties.
        let ptr = unsafe {
            (self.platform().usm.device_alloc)(
                self.platform().context,
                self.shared.device,
                null(),
                bytes,
                ALIGNMENT,
                &mut status,
            )
        };
        let out_of_memory = matches!(
            status,
            sys::MEM_OBJECT_ALLOCATION_FAILURE | sys::OUT_OF_RESOURCES | sys::INVALID_BUFFER_SIZE
        );
        if out_of_memory || (status == 0 && ptr.is_null()) {
            return Err(Error::OutOfMemory {
                kernel: requester,
                device: self.shared.name.clone(),
                bytes,
            });
        }
        sys::check("clDeviceMemAllocINTEL", status).map_err(self.failed("allocating memory"))?;
        self.allocations().insert(ptr as u64, bytes);
        Ok(DevicePtr(ptr as u64))
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        self.allocations().remove(&ptr.0);
        // SAFETY: USM memory of this context (the contract); the blocking free waits for the
        // queued work that uses it.
        let status = unsafe {
            (self.platform().usm.free)(self.platform().context, ptr.0 as usize as *mut c_void)
        };
        if let Err(e) = sys::check("clMemBlockingFreeINTEL", status) {
            tracing::warn!(device = %self.shared.name, "{e}");
        }
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()> {
        // SAFETY: the contract.
        unsafe { self.memcpy(dst.0 as usize as *mut c_void, src.cast(), bytes) }
    }

    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: the contract.
        unsafe { self.memcpy(dst.cast(), src.0 as usize as *const c_void, bytes) }
    }

    unsafe fn fill_zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        self.live()?;
        if bytes == 0 {
            return Ok(());
        }
        let zero = 0u8;
        // SAFETY: `dst` holds `bytes` bytes (the contract); the one-byte pattern is read when
        // the fill is queued.
        let status = unsafe {
            (self.platform().usm.fill)(
                self.queue,
                dst.0 as usize as *mut c_void,
                (&zero as *const u8).cast(),
                1,
                bytes,
                0,
                null(),
                null_mut(),
            )
        };
        sys::check("clEnqueueMemFillINTEL", status).map_err(self.failed("zeroing device memory"))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8> {
        self.live()?;
        let mut status = 0;
        // SAFETY: no properties; page alignment.
        let ptr = unsafe {
            (self.platform().usm.host_alloc)(
                self.platform().context,
                null(),
                bytes,
                4096,
                &mut status,
            )
        };
        sys::check("clHostMemAllocINTEL", status)
            .map_err(self.failed("allocating pinned memory"))?;
        if ptr.is_null() {
            return Err(Error::OutOfMemory {
                kernel: "pinned host memory",
                device: self.shared.name.clone(),
                bytes,
            });
        }
        Ok(ptr.cast())
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        // SAFETY: USM host memory of this context (the contract).
        let status = unsafe { (self.platform().usm.free)(self.platform().context, ptr.cast()) };
        if let Err(e) = sys::check("clMemBlockingFreeINTEL", status) {
            tracing::warn!(device = %self.shared.name, "{e}");
        }
    }

    /// USM host memory is reached by the context's devices at its host address.
    fn pinned_device_address(&self, ptr: *mut u8) -> Option<DevicePtr> {
        Some(DevicePtr(ptr as u64))
    }

    fn code_rank(&self, code: &Code<'_>) -> Option<u32> {
        match code {
            Code::Image(image) => program::rank(image),
            Code::Host { .. } => None,
        }
    }

    fn target(&self) -> String {
        "spirv64-v1.4".to_string()
    }

    fn load_image(&self, code: &Code<'static>) -> Result<ImageHandle> {
        self.live()?;
        let rejected = self.failed("loading an image");
        let Code::Image(image) = code else {
            return Err(rejected("OpenCL runs SPIR-V images only".to_string()));
        };
        let sub_groups = program::required_sub_group_sizes(image.bytes);
        // SAFETY: the device is in the context.
        let handle = unsafe {
            program::build(
                self.api(),
                self.platform().context,
                self.shared.device,
                image.bytes,
            )
        }
        .map_err(|e| {
            let sizes = &self.shared.sub_group_sizes;
            let unmet: Vec<&str> = sub_groups
                .iter()
                .filter(|&(name, width)| {
                    program::unmet_sub_group(name, Some(*width), sizes).is_some()
                })
                .map(|(name, _)| name.as_str())
                .collect();
            let note = if unmet.is_empty() {
                String::new()
            } else {
                format!(
                    " (its warp kernels {unmet:?} need sub-groups of 32; this device runs \
                     sub-groups of {:?})",
                    self.shared.sub_group_sizes
                )
            };
            rejected(format!("the driver rejected the SPIR-V image{note}: {e}"))
        })?;
        tracing::debug!(device = %self.shared.name, "OpenCL built a SPIR-V image");
        let mut programs = self.programs();
        programs.push(Program { handle, sub_groups });
        Ok(ImageHandle(programs.len() as u64 - 1))
    }

    fn find_entry(&self, image: ImageHandle, name: &str) -> Result<EntryHandle> {
        self.live()?;
        let failed = self.failed("finding a kernel entry");
        let mut entries = self.entries();
        if let Some(i) = entries
            .iter()
            .position(|e| e.image == image.0 && e.name == name)
        {
            return Ok(EntryHandle(i as u64));
        }
        let programs = self.programs();
        let program = programs
            .get(image.0 as usize)
            .ok_or_else(|| failed(format!("no image {}", image.0)))?;
        let sub_group = program
            .sub_groups
            .iter()
            .find(|(kernel, _)| kernel == name)
            .map(|&(_, width)| width);
        if let Some(why) = program::unmet_sub_group(name, sub_group, &self.shared.sub_group_sizes) {
            return Err(failed(why));
        }
        let c_name = CString::new(name).map_err(|e| failed(e.to_string()))?;
        let mut status = 0;
        // SAFETY: a built program; the name is NUL-terminated.
        let kernel =
            unsafe { (self.api().clCreateKernel)(program.handle, c_name.as_ptr(), &mut status) };
        sys::check("clCreateKernel", status)
            .map_err(|e| failed(format!("the image has no entry point `{name}`: {e}")))?;
        let query = |param: u32| -> u64 {
            let mut value = 0u64;
            // SAFETY: a kernel of this device; the value (size_t or cl_ulong) fits in 8 bytes.
            let status = unsafe {
                (self.api().clGetKernelWorkGroupInfo)(
                    kernel,
                    self.shared.device,
                    param,
                    8,
                    (&mut value as *mut u64).cast(),
                    null_mut(),
                )
            };
            if status == 0 {
                value
            } else {
                0
            }
        };
        let max_threads = match query(sys::KERNEL_WORK_GROUP_SIZE) {
            0 => self.shared.limits.max_threads_per_block,
            n => (n as u32).min(self.shared.limits.max_threads_per_block),
        };
        entries.push(Entry {
            kernel,
            image: image.0,
            name: interned(name),
            sub_group,
            limits: EntryLimits {
                max_threads_per_block: max_threads,
                registers: 0,
                static_shared: query(sys::KERNEL_LOCAL_MEM_SIZE) as u32,
            },
        });
        Ok(EntryHandle(entries.len() as u64 - 1))
    }

    fn entry_limits(&self, entry: EntryHandle) -> Result<EntryLimits> {
        self.entries()
            .get(entry.0 as usize)
            .map(|e| e.limits)
            .ok_or_else(|| {
                self.failed("reading a kernel's limits")(format!("no entry {}", entry.0))
            })
    }

    fn find_global(&self, image: ImageHandle, name: &str) -> Result<Option<(DevicePtr, usize)>> {
        self.live()?;
        let programs = self.programs();
        let Some(program) = programs.get(image.0 as usize) else {
            return Ok(None);
        };
        let Ok(c_name) = CString::new(name) else {
            return Ok(None);
        };
        let (mut size, mut ptr) = (0usize, null_mut());
        // SAFETY: a built program of this device; the results are written to locals.
        let status = unsafe {
            (self.platform().usm.global_pointer)(
                self.shared.device,
                program.handle,
                c_name.as_ptr(),
                &mut size,
                &mut ptr,
            )
        };
        if status != 0 || ptr.is_null() {
            tracing::debug!(device = %self.shared.name, "no global `{name}`: OpenCL error {status}");
            return Ok(None);
        }
        Ok(Some((DevicePtr(ptr as u64), size)))
    }

    unsafe fn launch(&self, entry: EntryHandle, shape: Shape, args: &PackedArgs) -> Result<()> {
        self.live()?;
        let failed = self.failed("launching a kernel");
        let entries = self.entries();
        let entry = entries
            .get(entry.0 as usize)
            .ok_or_else(|| failed(format!("no entry {}", entry.0)))?;
        let invalid = |reason: String| Error::InvalidLaunch {
            kernel: entry.name,
            device: self.shared.name.clone(),
            reason,
        };
        if let Some(why) = program::unfit_block(entry.sub_group, shape.block.x) {
            return Err(invalid(why));
        }
        let api = self.api();
        let set = |index: usize, status: sys::Status| {
            sys::check("clSetKernelArg", status)
                .map_err(|e| failed(format!("parameter {index}: {e}")))
        };
        for (index, param) in args.params().iter().enumerate() {
            // SAFETY: the parameter's bytes lie in the buffer; an address parameter holds a USM
            // address (or 0 for an empty slice), which the kernel reaches until it completes
            // (the contract). The kernel object is ours, under the `entries` lock.
            let status = unsafe {
                let at = args.as_ptr().add(param.offset);
                if param.address {
                    let address = (at as *const u64).read_unaligned();
                    (self.platform().usm.set_arg_pointer)(
                        entry.kernel,
                        index as u32,
                        address as usize as *const c_void,
                    )
                } else {
                    (api.clSetKernelArg)(entry.kernel, index as u32, param.size, at.cast())
                }
            };
            set(index, status)?;
        }
        // The two hidden parameters the SPIR-V pass appends to every kernel: the dynamic shared
        // memory (local memory) and its size.
        let hidden = args.params().len();
        let local = (shape.dynamic_shared as usize).max(MIN_LOCAL_BYTES);
        let bytes = shape.dynamic_shared as u64;
        // SAFETY: a local-memory parameter takes a size and no value; the size is a u64.
        unsafe {
            set(
                hidden,
                (api.clSetKernelArg)(entry.kernel, hidden as u32, local, null()),
            )?;
            set(
                hidden + 1,
                (api.clSetKernelArg)(
                    entry.kernel,
                    hidden as u32 + 1,
                    8,
                    (&bytes as *const u64).cast(),
                ),
            )?;
        }
        let (grid, block) = (shape.grid, shape.block);
        let local_size = [block.x as usize, block.y as usize, block.z as usize];
        let global = [
            grid.x as usize * local_size[0],
            grid.y as usize * local_size[1],
            grid.z as usize * local_size[2],
        ];
        // SAFETY: every parameter is set; the sizes are read during the call.
        let status = unsafe {
            (api.clEnqueueNDRangeKernel)(
                self.queue,
                entry.kernel,
                3,
                null(),
                global.as_ptr(),
                local_size.as_ptr(),
                0,
                null(),
                null_mut(),
            )
        };
        match status {
            0 => Ok(()),
            sys::INVALID_WORK_GROUP_SIZE | sys::OUT_OF_RESOURCES => Err(invalid(format!(
                "{} threads per block and {} bytes of dynamic shared memory are more than this \
                 kernel can run with ({})",
                block.count(),
                shape.dynamic_shared,
                sys::check("clEnqueueNDRangeKernel", status).unwrap_err()
            ))),
            _ => Err(failed(
                sys::check("clEnqueueNDRangeKernel", status).unwrap_err(),
            )),
        }
    }

    fn synchronize(&self) -> Result<()> {
        self.live()?;
        // SAFETY: a live queue.
        let status = unsafe { (self.api().clFinish)(self.queue) };
        sys::check("clFinish", status).map_err(self.failed("synchronizing"))
    }

    fn release(&self) -> Result<()> {
        if self.shared.released.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let api = self.api();
        let queues = self.shared.queues.lock().unwrap_or_else(|p| p.into_inner());
        let mut result = Ok(());
        for &queue in queues.iter() {
            // SAFETY: a live queue of the device.
            let status = unsafe { (api.clFinish)(queue as Handle) };
            if result.is_ok() {
                result =
                    sys::check("clFinish", status).map_err(self.failed("releasing the device"));
            }
        }
        for entry in self.entries().drain(..) {
            // SAFETY: no queue uses the kernel any more, and it is not used afterwards.
            unsafe { (api.clReleaseKernel)(entry.kernel) };
        }
        for program in self.programs().drain(..) {
            // SAFETY: as for the kernels.
            unsafe { (api.clReleaseProgram)(program.handle) };
        }
        result
    }

    fn new_queue(&self) -> Result<Arc<dyn Backend>> {
        self.live()?;
        // SAFETY: the device is in the platform's context.
        let queue = unsafe { create_queue(self.platform(), self.shared.device) }
            .map_err(self.failed("creating a queue"))?;
        self.shared
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(queue as usize);
        Ok(Arc::new(OpenClBackend {
            shared: self.shared.clone(),
            queue,
        }))
    }

    fn native_queue(&self) -> Option<NativeQueue> {
        Some(NativeQueue::OpenCl { queue: self.queue })
    }

    fn record_event(&self) -> Result<Box<dyn QueueEvent>> {
        self.live()?;
        // SAFETY: a live queue of the platform.
        let event = unsafe {
            ClEvent::record(self.shared.platform.clone(), self.queue, &self.shared.name)
        }?;
        Ok(Box::new(event))
    }

    fn wait_event(&self, event: &dyn QueueEvent) -> Result<()> {
        self.live()?;
        let failed = self.failed("waiting for an event");
        let Some(event) = event.as_any().downcast_ref::<ClEvent>() else {
            return Err(failed("the event is not an OpenCL event".to_string()));
        };
        // SAFETY: a live queue and event of one context.
        let status = unsafe {
            (self.api().clEnqueueBarrierWithWaitList)(self.queue, 1, &event.event, null_mut())
        };
        sys::check("clEnqueueBarrierWithWaitList", status).map_err(failed)
    }
}

impl Drop for OpenClBackend {
    fn drop(&mut self) {
        let api = self.api();
        // SAFETY: the queue is this instance's; it is drained, then released and not used again.
        unsafe {
            (api.clFinish)(self.queue);
            (api.clReleaseCommandQueue)(self.queue);
        }
        self.shared
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&q| q != self.queue as usize);
    }
}
