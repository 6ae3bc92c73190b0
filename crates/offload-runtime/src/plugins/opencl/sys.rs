//! The raw OpenCL interface: the ICD loader (`libOpenCL.so.1`) opened at run time with the core
//! entry points the plugin calls, the `cl_intel_unified_shared_memory` ones (which the ICD loader
//! does not export: each platform gives them through `clGetExtensionFunctionAddressForPlatform`),
//! the constants used, and the checked-call helper.

use std::ffi::{c_char, c_void, CString};

/// An OpenCL object (`cl_platform_id`, `cl_device_id`, `cl_context`, `cl_command_queue`, ...).
pub type Handle = *mut c_void;
/// `cl_int`: 0 is `CL_SUCCESS`, negative values are errors.
pub type Status = i32;

pub const DEVICE_TYPE_ALL: u64 = 0xffff_ffff;
pub const DEVICE_TYPE_CPU: u64 = 1 << 1;
pub const DEVICE_TYPE_GPU: u64 = 1 << 2;

pub const DEVICE_TYPE: u32 = 0x1000;
pub const DEVICE_MAX_COMPUTE_UNITS: u32 = 0x1002;
pub const DEVICE_MAX_WORK_GROUP_SIZE: u32 = 0x1004;
pub const DEVICE_MAX_WORK_ITEM_SIZES: u32 = 0x1005;
pub const DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
pub const DEVICE_LOCAL_MEM_SIZE: u32 = 0x1023;
pub const DEVICE_NAME: u32 = 0x102B;
pub const DRIVER_VERSION: u32 = 0x102D;
pub const DEVICE_VERSION: u32 = 0x102F;
pub const DEVICE_EXTENSIONS: u32 = 0x1030;
pub const DEVICE_IL_VERSION: u32 = 0x105B;
/// `CL_DEVICE_UUID_KHR` (`cl_khr_device_uuid`).
pub const DEVICE_UUID: u32 = 0x106A;
/// `CL_DEVICE_SUB_GROUP_SIZES_INTEL` (`cl_intel_required_subgroup_size`).
pub const DEVICE_SUB_GROUP_SIZES: u32 = 0x4108;

pub const PROGRAM_BINARY_SIZES: u32 = 0x1165;
pub const PROGRAM_BINARIES: u32 = 0x1166;
pub const PROGRAM_BUILD_LOG: u32 = 0x1183;
pub const KERNEL_WORK_GROUP_SIZE: u32 = 0x11B0;
pub const KERNEL_LOCAL_MEM_SIZE: u32 = 0x11B2;
pub const QUEUE_PROPERTIES: u64 = 0x1093;
pub const QUEUE_PROFILING_ENABLE: u64 = 1 << 1;
pub const PROFILING_COMMAND_END: u32 = 0x1283;

pub const OUT_OF_RESOURCES: Status = -5;
pub const MEM_OBJECT_ALLOCATION_FAILURE: Status = -4;
pub const INVALID_WORK_GROUP_SIZE: Status = -54;
pub const INVALID_BUFFER_SIZE: Status = -61;

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// The core entry points, from the ICD loader.
        #[allow(non_snake_case)]
        pub struct Api { $(pub $name: unsafe extern "C" fn($($arg),*) -> $ret,)* }

        impl Api {
            fn load(lib: &libloading::Library) -> Result<Api, String> {
                Ok(Api { $($name: {
                    // SAFETY: the symbol is the OpenCL entry point of this name, with this
                    // signature (OpenCL 3.0, cl.h).
                    let f = unsafe {
                        lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(stringify!($name).as_bytes())
                    }
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
    clReleaseCommandQueue: fn(Handle) -> Status;
    clCreateProgramWithIL: fn(Handle, *const c_void, usize, *mut Status) -> Handle;
    clCreateProgramWithBinary: fn(Handle, u32, *const Handle, *const usize, *const *const u8, *mut Status, *mut Status) -> Handle;
    clGetProgramInfo: fn(Handle, u32, usize, *mut c_void, *mut usize) -> Status;
    clBuildProgram: fn(Handle, u32, *const Handle, *const c_char, *const c_void, *mut c_void) -> Status;
    clGetProgramBuildInfo: fn(Handle, Handle, u32, usize, *mut c_void, *mut usize) -> Status;
    clReleaseProgram: fn(Handle) -> Status;
    clCreateKernel: fn(Handle, *const c_char, *mut Status) -> Handle;
    clGetKernelWorkGroupInfo: fn(Handle, Handle, u32, usize, *mut c_void, *mut usize) -> Status;
    clReleaseKernel: fn(Handle) -> Status;
    clSetKernelArg: fn(Handle, u32, usize, *const c_void) -> Status;
    clEnqueueNDRangeKernel: fn(Handle, Handle, u32, *const usize, *const usize, *const usize, u32, *const Handle, *mut Handle) -> Status;
    clEnqueueMarkerWithWaitList: fn(Handle, u32, *const Handle, *mut Handle) -> Status;
    clEnqueueBarrierWithWaitList: fn(Handle, u32, *const Handle, *mut Handle) -> Status;
    clFinish: fn(Handle) -> Status;
    clWaitForEvents: fn(u32, *const Handle) -> Status;
    clGetEventProfilingInfo: fn(Handle, u32, usize, *mut c_void, *mut usize) -> Status;
    clReleaseEvent: fn(Handle) -> Status;
    clGetExtensionFunctionAddressForPlatform: fn(Handle, *const c_char) -> *mut c_void;
}

/// The ICD loader, opened once per process (it stays loaded until exit).
pub struct Library {
    pub api: Api,
    _lib: libloading::Library,
}

impl Library {
    pub fn open() -> Result<Library, String> {
        // SAFETY: loading the ICD loader runs its initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new("libOpenCL.so.1") }
            .map_err(|e| format!("no OpenCL ICD loader: {e}"))?;
        Ok(Library {
            api: Api::load(&lib)?,
            _lib: lib,
        })
    }
}

/// `clDeviceMemAllocINTEL`.
pub type DeviceMemAlloc =
    unsafe extern "C" fn(Handle, Handle, *const u64, usize, u32, *mut Status) -> *mut c_void;
/// `clHostMemAllocINTEL`.
pub type HostMemAlloc =
    unsafe extern "C" fn(Handle, *const u64, usize, u32, *mut Status) -> *mut c_void;
/// `clMemBlockingFreeINTEL`.
pub type MemBlockingFree = unsafe extern "C" fn(Handle, *mut c_void) -> Status;
/// `clEnqueueMemcpyINTEL`.
pub type EnqueueMemcpy = unsafe extern "C" fn(
    Handle,
    u32,
    *mut c_void,
    *const c_void,
    usize,
    u32,
    *const Handle,
    *mut Handle,
) -> Status;
/// `clEnqueueMemFillINTEL`.
pub type EnqueueMemFill = unsafe extern "C" fn(
    Handle,
    *mut c_void,
    *const c_void,
    usize,
    usize,
    u32,
    *const Handle,
    *mut Handle,
) -> Status;
/// `clSetKernelArgMemPointerINTEL`.
pub type SetKernelArgMemPointer = unsafe extern "C" fn(Handle, u32, *const c_void) -> Status;
/// `clGetDeviceGlobalVariablePointerINTEL`.
pub type GetDeviceGlobalVariablePointer =
    unsafe extern "C" fn(Handle, Handle, *const c_char, *mut usize, *mut *mut c_void) -> Status;

/// A platform's unified-shared-memory entry points.
pub struct Usm {
    pub device_alloc: DeviceMemAlloc,
    pub host_alloc: HostMemAlloc,
    pub free: MemBlockingFree,
    pub memcpy: EnqueueMemcpy,
    pub fill: EnqueueMemFill,
    pub set_arg_pointer: SetKernelArgMemPointer,
    pub global_pointer: GetDeviceGlobalVariablePointer,
}

impl Usm {
    /// The entry points of `platform`, or the first it lacks.
    ///
    /// # Safety
    /// `platform` is a platform of `api`.
    pub unsafe fn load(api: &Api, platform: Handle) -> Result<Usm, String> {
        let get = |name: &str| -> Result<*mut c_void, String> {
            let c = CString::new(name).expect("no NUL in the name");
            // SAFETY: a valid platform and a NUL-terminated name (the contract).
            let f = unsafe { (api.clGetExtensionFunctionAddressForPlatform)(platform, c.as_ptr()) };
            if f.is_null() {
                Err(format!(
                    "the platform lacks {name} (cl_intel_unified_shared_memory)"
                ))
            } else {
                Ok(f)
            }
        };
        // SAFETY: each address is the platform's entry point of that name, whose C signature
        // is the function type it becomes (cl_ext.h).
        unsafe {
            use std::mem::transmute;
            Ok(Usm {
                device_alloc: transmute::<*mut c_void, DeviceMemAlloc>(get(
                    "clDeviceMemAllocINTEL",
                )?),
                host_alloc: transmute::<*mut c_void, HostMemAlloc>(get("clHostMemAllocINTEL")?),
                free: transmute::<*mut c_void, MemBlockingFree>(get("clMemBlockingFreeINTEL")?),
                memcpy: transmute::<*mut c_void, EnqueueMemcpy>(get("clEnqueueMemcpyINTEL")?),
                fill: transmute::<*mut c_void, EnqueueMemFill>(get("clEnqueueMemFillINTEL")?),
                set_arg_pointer: transmute::<*mut c_void, SetKernelArgMemPointer>(get(
                    "clSetKernelArgMemPointerINTEL",
                )?),
                global_pointer: transmute::<*mut c_void, GetDeviceGlobalVariablePointer>(get(
                    "clGetDeviceGlobalVariablePointerINTEL",
                )?),
            })
        }
    }
}

/// `Ok` for `CL_SUCCESS`, else the call's name and the error code.
pub fn check(call: &str, status: Status) -> Result<(), String> {
    if status == 0 {
        Ok(())
    } else {
        Err(format!(
            "{call} failed: OpenCL error {status}{}",
            name_of(status)
        ))
    }
}

/// The names of the errors the plugin's callers meet most.
fn name_of(status: Status) -> &'static str {
    match status {
        -4 => " (CL_MEM_OBJECT_ALLOCATION_FAILURE)",
        -5 => " (CL_OUT_OF_RESOURCES)",
        -6 => " (CL_OUT_OF_HOST_MEMORY)",
        -11 => " (CL_BUILD_PROGRAM_FAILURE)",
        -30 => " (CL_INVALID_VALUE)",
        -46 => " (CL_INVALID_KERNEL_NAME)",
        -51 => " (CL_INVALID_ARG_SIZE)",
        -52 => " (CL_INVALID_KERNEL_ARGS)",
        -54 => " (CL_INVALID_WORK_GROUP_SIZE)",
        -55 => " (CL_INVALID_WORK_ITEM_SIZE)",
        -61 => " (CL_INVALID_BUFFER_SIZE)",
        -1001 => {
            " (CL_PLATFORM_NOT_FOUND_KHR: no OpenCL driver; OCL_ICD_VENDORS names where they are)"
        }
        _ => "",
    }
}

/// A device's information `param` as raw bytes.
///
/// # Safety
/// `device` is a device of `api`.
pub unsafe fn device_info(api: &Api, device: Handle, param: u32) -> Result<Vec<u8>, String> {
    let mut len = 0;
    // SAFETY: a size query, then a buffer of that size (the contract for the handle).
    unsafe {
        check(
            "clGetDeviceInfo",
            (api.clGetDeviceInfo)(device, param, 0, std::ptr::null_mut(), &mut len),
        )?;
        let mut bytes = vec![0u8; len];
        check(
            "clGetDeviceInfo",
            (api.clGetDeviceInfo)(device, param, len, bytes.as_mut_ptr().cast(), &mut len),
        )?;
        bytes.truncate(len);
        Ok(bytes)
    }
}

/// A string value of [`device_info`], without its NUL.
///
/// # Safety
/// As [`device_info`].
pub unsafe fn device_string(api: &Api, device: Handle, param: u32) -> Result<String, String> {
    // SAFETY: the contract.
    let bytes = unsafe { device_info(api, device, param) }?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// A `size_t`, `cl_uint` or `cl_ulong` value of [`device_info`] (as many bytes as it holds).
///
/// # Safety
/// As [`device_info`].
pub unsafe fn device_number(api: &Api, device: Handle, param: u32) -> Result<u64, String> {
    // SAFETY: the contract.
    let bytes = unsafe { device_info(api, device, param) }?;
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    Ok(u64::from_le_bytes(word))
}

/// A `size_t[]` value of [`device_info`].
///
/// # Safety
/// As [`device_info`].
pub unsafe fn device_sizes(api: &Api, device: Handle, param: u32) -> Result<Vec<usize>, String> {
    // SAFETY: the contract.
    let bytes = unsafe { device_info(api, device, param) }?;
    Ok(bytes
        .chunks_exact(size_of::<usize>())
        .map(|c| usize::from_ne_bytes(c.try_into().expect("a usize's bytes")))
        .collect())
}
