//! Just enough OpenCL, loaded at run time (`libOpenCL.so.1`, the ICD loader, through
//! libloading), to run the SPIR-V image's kernels: one device that takes SPIR-V, its program
//! built from the image with `clCreateProgramWithIL`, device memory and copies through Intel's
//! unified shared memory (`cl_intel_unified_shared_memory`, what Intel GPUs and the CPU runtime
//! offer), launches with the device ABI of offload's kernels, and the image's panic record read
//! through `clGetDeviceGlobalVariablePointerINTEL`.

use offload::panic_record::PanicRecord;
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};

type Handle = *mut c_void;
type Status = i32;

const DEVICE_TYPE_ALL: u64 = 0xffff_ffff;
const DEVICE_IL_VERSION: u32 = 0x105B;
const PROGRAM_BUILD_LOG: u32 = 0x1183;
/// Division and square root correctly rounded in f32, as on the host and in PTX.
const BUILD_OPTIONS: &str = "-cl-fp32-correctly-rounded-divide-sqrt";

/// One kernel argument in offload's device ABI.
pub enum Arg<'a> {
    /// A device address (from [`OpenCl::alloc`]): a CrossWorkgroup pointer parameter.
    Buffer(*mut c_void),
    /// A value's bytes: scalars, lengths and structs passed by value.
    Value(&'a [u8]),
}

/// A value's bytes, for [`Arg::Value`].
pub fn bytes_of<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: a live `T` is readable as its bytes; the kernels' by-value types have no padding
    // that the kernel reads.
    unsafe { std::slice::from_raw_parts(value as *const T as *const u8, std::mem::size_of::<T>()) }
}

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) -> $ret:ty;)*) => {
        #[allow(non_snake_case)]
        struct Api { $($name: unsafe extern "C" fn($($arg),*) -> $ret,)* }
        impl Api {
            fn load(lib: &libloading::Library) -> Result<Api, String> {
                Ok(Api { $($name: {
                    // SAFETY: the symbol is the OpenCL entry point of this name and signature.
                    let f = unsafe { lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(stringify!($name).as_bytes()) }
                        .map_err(|e| format!("{}: {e}", stringify!($name)))?;
                    *f
                },)* })
            }
        }
    };
}

api! {
    clGetPlatformIDs: fn(u32, *mut Handle, *mut u32) -> Status;
    clGetDeviceIDs: fn(Handle, u64, u32, *mut Handle, *mut u32) -> Status;
    clGetDeviceInfo: fn(Handle, u32, usize, *mut c_void, *mut usize) -> Status;
    clCreateContext: fn(*const isize, u32, *const Handle, *const c_void, *mut c_void, *mut Status) -> Handle;
    clCreateCommandQueueWithProperties: fn(Handle, Handle, *const u64, *mut Status) -> Handle;
    clCreateProgramWithIL: fn(Handle, *const c_void, usize, *mut Status) -> Handle;
    clBuildProgram: fn(Handle, u32, *const Handle, *const i8, *const c_void, *mut c_void) -> Status;
    clGetProgramBuildInfo: fn(Handle, Handle, u32, usize, *mut c_void, *mut usize) -> Status;
    clCreateKernel: fn(Handle, *const i8, *mut Status) -> Handle;
    clReleaseKernel: fn(Handle) -> Status;
    clSetKernelArg: fn(Handle, u32, usize, *const c_void) -> Status;
    clEnqueueNDRangeKernel: fn(Handle, Handle, u32, *const usize, *const usize, *const usize, u32, *const Handle, *mut Handle) -> Status;
    clFinish: fn(Handle) -> Status;
    clGetExtensionFunctionAddressForPlatform: fn(Handle, *const i8) -> *mut c_void;
}

type DeviceMemAlloc =
    unsafe extern "C" fn(Handle, Handle, *const u64, usize, u32, *mut Status) -> *mut c_void;
type MemFree = unsafe extern "C" fn(Handle, *mut c_void) -> Status;
type SetArgPointer = unsafe extern "C" fn(Handle, u32, *const c_void) -> Status;
type Memcpy = unsafe extern "C" fn(
    Handle,
    u32,
    *mut c_void,
    *const c_void,
    usize,
    u32,
    *const Handle,
    *mut Handle,
) -> Status;
type GlobalPointer =
    unsafe extern "C" fn(Handle, Handle, *const i8, *mut usize, *mut *mut c_void) -> Status;

/// A device with the kernels module's program built for it.
pub struct OpenCl {
    api: Api,
    device: Handle,
    context: Handle,
    queue: Handle,
    program: Handle,
    alloc: DeviceMemAlloc,
    free: MemFree,
    set_arg_pointer: SetArgPointer,
    memcpy: Memcpy,
    global_pointer: GlobalPointer,
    pub device_name: String,
    _lib: libloading::Library,
}

// SAFETY: OpenCL objects may be used from any thread (OpenCL 1.1 and later); the tests use the
// queue from one thread at a time (behind a mutex).
unsafe impl Send for OpenCl {}

fn check(what: &str, status: Status) -> Result<(), String> {
    if status == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed: OpenCL error {status}"))
    }
}

impl OpenCl {
    /// The first device that takes SPIR-V, with `spirv` built; `Err` says why there is none.
    pub fn load(spirv: &[u8]) -> Result<OpenCl, String> {
        // SAFETY: loading the ICD loader runs its initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new("libOpenCL.so.1") }
            .map_err(|e| format!("no OpenCL ICD loader: {e}"))?;
        let api = Api::load(&lib)?;
        // SAFETY: every call below follows the OpenCL specification: out-pointers point to
        // locals of the right type and size, handles come from earlier successful calls.
        unsafe {
            let mut platforms = [null_mut(); 8];
            let mut count = 0;
            check(
                "clGetPlatformIDs",
                (api.clGetPlatformIDs)(8, platforms.as_mut_ptr(), &mut count),
            )?;
            for &platform in &platforms[..count.min(8) as usize] {
                let mut device = null_mut();
                if (api.clGetDeviceIDs)(platform, DEVICE_TYPE_ALL, 1, &mut device, null_mut()) != 0
                {
                    continue;
                }
                let mut il = [0u8; 256];
                let mut len = 0;
                (api.clGetDeviceInfo)(
                    device,
                    DEVICE_IL_VERSION,
                    il.len(),
                    il.as_mut_ptr().cast(),
                    &mut len,
                );
                if !String::from_utf8_lossy(&il[..len]).contains("SPIR-V_1.4") {
                    continue;
                }
                return Self::build(lib, api, platform, device, spirv);
            }
        }
        Err("no OpenCL device takes SPIR-V 1.4 (install one: scripts/install-intel-opencl)".into())
    }

    /// # Safety
    /// `platform` and `device` are valid handles of `api`.
    unsafe fn build(
        lib: libloading::Library,
        api: Api,
        platform: Handle,
        device: Handle,
        spirv: &[u8],
    ) -> Result<OpenCl, String> {
        // SAFETY: as in `load`.
        unsafe {
            let mut status = 0;
            let context =
                (api.clCreateContext)(null(), 1, &device, null(), null_mut(), &mut status);
            check("clCreateContext", status)?;
            let queue =
                (api.clCreateCommandQueueWithProperties)(context, device, null(), &mut status);
            check("clCreateCommandQueueWithProperties", status)?;
            let program = (api.clCreateProgramWithIL)(
                context,
                spirv.as_ptr().cast(),
                spirv.len(),
                &mut status,
            );
            check("clCreateProgramWithIL", status)?;
            let options = CString::new(BUILD_OPTIONS).unwrap();
            let built =
                (api.clBuildProgram)(program, 1, &device, options.as_ptr(), null(), null_mut());
            if built != 0 {
                let mut log = vec![0u8; 1 << 20];
                let mut len = 0;
                (api.clGetProgramBuildInfo)(
                    program,
                    device,
                    PROGRAM_BUILD_LOG,
                    log.len(),
                    log.as_mut_ptr().cast(),
                    &mut len,
                );
                return Err(format!(
                    "clBuildProgram failed ({built}): {}",
                    String::from_utf8_lossy(&log[..len.min(log.len())])
                ));
            }
            let ext = |name: &str| -> Result<*mut c_void, String> {
                let c = CString::new(name).unwrap();
                let f = (api.clGetExtensionFunctionAddressForPlatform)(platform, c.as_ptr());
                if f.is_null() {
                    Err(format!("the platform lacks {name}"))
                } else {
                    Ok(f)
                }
            };
            let mut name = [0u8; 256];
            let mut len = 0;
            (api.clGetDeviceInfo)(
                device,
                0x102B,
                name.len(),
                name.as_mut_ptr().cast(),
                &mut len,
            );
            let device_name = String::from_utf8_lossy(&name[..len.saturating_sub(1)]).into_owned();
            Ok(OpenCl {
                alloc: std::mem::transmute::<*mut c_void, DeviceMemAlloc>(ext(
                    "clDeviceMemAllocINTEL",
                )?),
                free: std::mem::transmute::<*mut c_void, MemFree>(ext("clMemBlockingFreeINTEL")?),
                set_arg_pointer: std::mem::transmute::<*mut c_void, SetArgPointer>(ext(
                    "clSetKernelArgMemPointerINTEL",
                )?),
                memcpy: std::mem::transmute::<*mut c_void, Memcpy>(ext("clEnqueueMemcpyINTEL")?),
                global_pointer: std::mem::transmute::<*mut c_void, GlobalPointer>(ext(
                    "clGetDeviceGlobalVariablePointerINTEL",
                )?),
                api,
                device,
                context,
                queue,
                program,
                device_name,
                _lib: lib,
            })
        }
    }

    /// Device memory holding a copy of `data`.
    pub fn upload(&self, data: &[u8]) -> Result<*mut c_void, String> {
        let mut status = 0;
        // SAFETY: a USM device allocation of at least one byte; the copy reads `data` whole.
        unsafe {
            let ptr = (self.alloc)(
                self.context,
                self.device,
                null(),
                data.len().max(1),
                0,
                &mut status,
            );
            check("clDeviceMemAllocINTEL", status)?;
            check(
                "clEnqueueMemcpyINTEL",
                (self.memcpy)(
                    self.queue,
                    1,
                    ptr,
                    data.as_ptr().cast(),
                    data.len(),
                    0,
                    null(),
                    null_mut(),
                ),
            )?;
            Ok(ptr)
        }
    }

    /// Copies device memory from `upload` back into `data` and frees it.
    pub fn download(&self, ptr: *mut c_void, data: &mut [u8]) -> Result<(), String> {
        // SAFETY: `ptr` holds `data.len()` bytes (it came from `upload` of that many).
        unsafe {
            check(
                "clEnqueueMemcpyINTEL",
                (self.memcpy)(
                    self.queue,
                    1,
                    data.as_mut_ptr().cast(),
                    ptr,
                    data.len(),
                    0,
                    null(),
                    null_mut(),
                ),
            )?;
            check("clMemBlockingFreeINTEL", (self.free)(self.context, ptr))
        }
    }

    /// Runs `kernel` over `grid` blocks of `block` threads with `dynamic_shared` bytes of
    /// dynamic shared memory, and waits for it.
    pub fn launch(
        &self,
        kernel: &str,
        grid: [usize; 3],
        block: [usize; 3],
        dynamic_shared: usize,
        args: &[Arg<'_>],
    ) -> Result<(), String> {
        let name = CString::new(kernel).unwrap();
        let mut status = 0;
        // SAFETY: the arguments match the kernel's parameters in offload's device ABI (the
        // caller's duty), then the two hidden ones: the local memory and its size.
        unsafe {
            let k = (self.api.clCreateKernel)(self.program, name.as_ptr(), &mut status);
            check("clCreateKernel", status)?;
            let mut index = 0u32;
            for arg in args {
                let status = match arg {
                    Arg::Buffer(ptr) => (self.set_arg_pointer)(k, index, *ptr),
                    Arg::Value(bytes) => {
                        (self.api.clSetKernelArg)(k, index, bytes.len(), bytes.as_ptr().cast())
                    }
                };
                check("setting an argument", status)?;
                index += 1;
            }
            check(
                "the local memory argument",
                (self.api.clSetKernelArg)(k, index, dynamic_shared.max(16), null()),
            )?;
            let bytes = dynamic_shared as u64;
            check(
                "the local memory size",
                (self.api.clSetKernelArg)(k, index + 1, 8, (&bytes as *const u64).cast()),
            )?;
            let global = [grid[0] * block[0], grid[1] * block[1], grid[2] * block[2]];
            let result = check(
                "clEnqueueNDRangeKernel",
                (self.api.clEnqueueNDRangeKernel)(
                    self.queue,
                    k,
                    3,
                    null(),
                    global.as_ptr(),
                    block.as_ptr(),
                    0,
                    null(),
                    null_mut(),
                ),
            )
            .and_then(|()| check("clFinish", (self.api.clFinish)(self.queue)));
            (self.api.clReleaseKernel)(k);
            result
        }
    }

    /// The image's panic record, zeroed for the next launch.
    pub fn take_panic_record(&self) -> Result<PanicRecord, String> {
        let name = CString::new("OFFLOAD_PANIC_RECORD").unwrap();
        let mut size = 0;
        let mut ptr = null_mut();
        let mut record = PanicRecord::ZERO;
        // SAFETY: the global's address and size come from the runtime; the record is plain
        // bytes of exactly that size (checked).
        unsafe {
            check(
                "clGetDeviceGlobalVariablePointerINTEL",
                (self.global_pointer)(
                    self.device,
                    self.program,
                    name.as_ptr(),
                    &mut size,
                    &mut ptr,
                ),
            )?;
            if size != std::mem::size_of::<PanicRecord>() {
                return Err(format!("OFFLOAD_PANIC_RECORD has {size} bytes"));
            }
            let bytes = record.as_bytes_mut();
            check(
                "reading the record",
                (self.memcpy)(
                    self.queue,
                    1,
                    bytes.as_mut_ptr().cast(),
                    ptr,
                    size,
                    0,
                    null(),
                    null_mut(),
                ),
            )?;
            let zero = PanicRecord::ZERO;
            check(
                "zeroing the record",
                (self.memcpy)(
                    self.queue,
                    1,
                    ptr,
                    (&zero as *const PanicRecord).cast(),
                    size,
                    0,
                    null(),
                    null_mut(),
                ),
            )?;
        }
        Ok(record)
    }
}
