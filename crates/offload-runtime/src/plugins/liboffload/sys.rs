//! The raw interface of LLVM's liboffload (`libLLVMOffload.so`, header `offload/OffloadAPI.h`):
//! its C types and enumerations, the table of its entry points resolved at run time through
//! libloading, and which API generation a library speaks.
//!
//! The API is not stable across LLVM releases: LLVM 22 has `olInit()` and devices without
//! contexts; LLVM 23 takes `olInit(const ol_init_args_t *)`, adds contexts (`olCreateContext`),
//! gives `olCreateEvent` a flags argument and `olLaunchKernel` pointer arrays. Calling a 23
//! library through 22's signatures is undefined behaviour, so [`open`] decides the generation
//! before any call, from the library's file name and its symbols, and refuses what it does not
//! know. A 23 table is one more [`Generation`] with its own struct beside [`Api22`].

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};

/// `ol_errc_t`: the code of a failed call.
pub type ol_errc_t = u32;
pub const OL_ERRC_OUT_OF_RESOURCES: ol_errc_t = 7;

/// `ol_error_struct_t`: what a failed call points at.
#[repr(C)]
pub struct ol_error_struct_t {
    pub code: ol_errc_t,
    pub details: *const c_char,
}

/// `ol_result_t`: null on success, else the error (owned by liboffload, never freed).
pub type ol_result_t = *const ol_error_struct_t;

/// Opaque handle types.
#[repr(C)]
pub struct ol_device_impl_t {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ol_platform_impl_t {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ol_queue_impl_t {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ol_event_impl_t {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ol_program_impl_t {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ol_symbol_impl_t {
    _opaque: [u8; 0],
}
pub type ol_device_handle_t = *mut ol_device_impl_t;
pub type ol_platform_handle_t = *mut ol_platform_impl_t;
pub type ol_queue_handle_t = *mut ol_queue_impl_t;
pub type ol_event_handle_t = *mut ol_event_impl_t;
pub type ol_program_handle_t = *mut ol_program_impl_t;
pub type ol_symbol_handle_t = *mut ol_symbol_impl_t;

/// `ol_device_info_t` (the values this runtime asks for).
pub type ol_device_info_t = u32;
pub const OL_DEVICE_INFO_PLATFORM: ol_device_info_t = 1;
pub const OL_DEVICE_INFO_NAME: ol_device_info_t = 2;
pub const OL_DEVICE_INFO_PRODUCT_NAME: ol_device_info_t = 3;
pub const OL_DEVICE_INFO_UID: ol_device_info_t = 4;
pub const OL_DEVICE_INFO_MAX_WORK_GROUP_SIZE: ol_device_info_t = 7;
pub const OL_DEVICE_INFO_MAX_WORK_GROUP_SIZE_PER_DIMENSION: ol_device_info_t = 8;
pub const OL_DEVICE_INFO_NUM_COMPUTE_UNITS: ol_device_info_t = 12;
pub const OL_DEVICE_INFO_GLOBAL_MEM_SIZE: ol_device_info_t = 17;
pub const OL_DEVICE_INFO_WORK_GROUP_LOCAL_MEM_SIZE: ol_device_info_t = 18;

/// `ol_platform_info_t` (the values this runtime asks for).
pub type ol_platform_info_t = u32;
pub const OL_PLATFORM_INFO_VERSION: ol_platform_info_t = 2;
pub const OL_PLATFORM_INFO_BACKEND: ol_platform_info_t = 3;

/// `ol_platform_backend_t`.
pub type ol_platform_backend_t = u32;
pub const OL_PLATFORM_BACKEND_CUDA: ol_platform_backend_t = 1;
pub const OL_PLATFORM_BACKEND_AMDGPU: ol_platform_backend_t = 2;
pub const OL_PLATFORM_BACKEND_HOST: ol_platform_backend_t = 4;

/// `ol_alloc_type_t`.
pub type ol_alloc_type_t = u32;
pub const OL_ALLOC_TYPE_HOST: ol_alloc_type_t = 0;
pub const OL_ALLOC_TYPE_DEVICE: ol_alloc_type_t = 1;

/// `ol_symbol_kind_t`.
pub type ol_symbol_kind_t = u32;
pub const OL_SYMBOL_KIND_KERNEL: ol_symbol_kind_t = 0;
pub const OL_SYMBOL_KIND_GLOBAL_VARIABLE: ol_symbol_kind_t = 1;

/// `ol_event_info_t`.
pub type ol_event_info_t = u32;
pub const OL_EVENT_INFO_IS_COMPLETE: ol_event_info_t = 1;

/// `ol_symbol_info_t`.
pub type ol_symbol_info_t = u32;
pub const OL_SYMBOL_INFO_GLOBAL_VARIABLE_ADDRESS: ol_symbol_info_t = 1;
pub const OL_SYMBOL_INFO_GLOBAL_VARIABLE_SIZE: ol_symbol_info_t = 2;

/// `ol_dimensions_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ol_dimensions_t {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

/// `ol_kernel_launch_size_args_t`: `size_t Dimensions` at 0, `NumGroups` at 8, `GroupSize` at
/// 20, `size_t DynSharedMemory` at 32; 40 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ol_kernel_launch_size_args_t {
    pub dimensions: usize,
    pub num_groups: ol_dimensions_t,
    pub group_size: ol_dimensions_t,
    pub dyn_shared_memory: usize,
}

const _: () = {
    assert!(std::mem::size_of::<ol_kernel_launch_size_args_t>() == 40);
    assert!(std::mem::offset_of!(ol_kernel_launch_size_args_t, num_groups) == 8);
    assert!(std::mem::offset_of!(ol_kernel_launch_size_args_t, group_size) == 20);
    assert!(std::mem::offset_of!(ol_kernel_launch_size_args_t, dyn_shared_memory) == 32);
};

pub type ol_device_iterate_cb_t =
    unsafe extern "C" fn(device: ol_device_handle_t, user_data: *mut c_void) -> bool;
pub type ol_host_function_cb_t = unsafe extern "C" fn(user_data: *mut c_void);

/// The API generation of a library. Only LLVM 22's is spoken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    Llvm22,
}

/// The LLVM 22 entry points (`OffloadAPI.h` of liboffload-22), resolved once; the library stays
/// loaded for the life of the process, so the pointers stay valid.
pub struct Api22 {
    pub init: unsafe extern "C" fn() -> ol_result_t,
    pub iterate_devices: unsafe extern "C" fn(
        callback: ol_device_iterate_cb_t,
        user_data: *mut c_void,
    ) -> ol_result_t,
    pub get_device_info: unsafe extern "C" fn(
        device: ol_device_handle_t,
        prop: ol_device_info_t,
        size: usize,
        value: *mut c_void,
    ) -> ol_result_t,
    pub get_device_info_size: unsafe extern "C" fn(
        device: ol_device_handle_t,
        prop: ol_device_info_t,
        size: *mut usize,
    ) -> ol_result_t,
    pub get_platform_info: unsafe extern "C" fn(
        platform: ol_platform_handle_t,
        prop: ol_platform_info_t,
        size: usize,
        value: *mut c_void,
    ) -> ol_result_t,
    pub get_platform_info_size: unsafe extern "C" fn(
        platform: ol_platform_handle_t,
        prop: ol_platform_info_t,
        size: *mut usize,
    ) -> ol_result_t,
    pub create_queue: unsafe extern "C" fn(
        device: ol_device_handle_t,
        queue: *mut ol_queue_handle_t,
    ) -> ol_result_t,
    pub destroy_queue: unsafe extern "C" fn(queue: ol_queue_handle_t) -> ol_result_t,
    pub sync_queue: unsafe extern "C" fn(queue: ol_queue_handle_t) -> ol_result_t,
    pub create_event: unsafe extern "C" fn(
        queue: ol_queue_handle_t,
        event: *mut ol_event_handle_t,
    ) -> ol_result_t,
    pub destroy_event: unsafe extern "C" fn(event: ol_event_handle_t) -> ol_result_t,
    pub sync_event: unsafe extern "C" fn(event: ol_event_handle_t) -> ol_result_t,
    pub get_event_info: unsafe extern "C" fn(
        event: ol_event_handle_t,
        prop: ol_event_info_t,
        size: usize,
        value: *mut c_void,
    ) -> ol_result_t,
    pub wait_events: unsafe extern "C" fn(
        queue: ol_queue_handle_t,
        events: *mut ol_event_handle_t,
        count: usize,
    ) -> ol_result_t,
    pub launch_host_function: unsafe extern "C" fn(
        queue: ol_queue_handle_t,
        callback: ol_host_function_cb_t,
        user_data: *mut c_void,
    ) -> ol_result_t,
    pub mem_alloc: unsafe extern "C" fn(
        device: ol_device_handle_t,
        kind: ol_alloc_type_t,
        size: usize,
        allocation: *mut *mut c_void,
    ) -> ol_result_t,
    pub mem_free: unsafe extern "C" fn(address: *mut c_void) -> ol_result_t,
    pub memcpy: unsafe extern "C" fn(
        queue: ol_queue_handle_t,
        dst: *mut c_void,
        dst_device: ol_device_handle_t,
        src: *const c_void,
        src_device: ol_device_handle_t,
        size: usize,
    ) -> ol_result_t,
    pub mem_fill: unsafe extern "C" fn(
        queue: ol_queue_handle_t,
        ptr: *mut c_void,
        pattern_size: usize,
        pattern: *const c_void,
        fill_size: usize,
    ) -> ol_result_t,
    pub create_program: unsafe extern "C" fn(
        device: ol_device_handle_t,
        data: *const c_void,
        size: usize,
        program: *mut ol_program_handle_t,
    ) -> ol_result_t,
    pub destroy_program: unsafe extern "C" fn(program: ol_program_handle_t) -> ol_result_t,
    pub is_valid_binary: unsafe extern "C" fn(
        device: ol_device_handle_t,
        data: *const c_void,
        size: usize,
        valid: *mut bool,
    ) -> ol_result_t,
    pub get_symbol: unsafe extern "C" fn(
        program: ol_program_handle_t,
        name: *const c_char,
        kind: ol_symbol_kind_t,
        symbol: *mut ol_symbol_handle_t,
    ) -> ol_result_t,
    pub get_symbol_info: unsafe extern "C" fn(
        symbol: ol_symbol_handle_t,
        prop: ol_symbol_info_t,
        size: usize,
        value: *mut c_void,
    ) -> ol_result_t,
    pub launch_kernel: unsafe extern "C" fn(
        queue: ol_queue_handle_t,
        device: ol_device_handle_t,
        kernel: ol_symbol_handle_t,
        arguments: *const c_void,
        arguments_size: usize,
        launch_size: *const ol_kernel_launch_size_args_t,
    ) -> ol_result_t,
    pub calculate_optimal_occupancy: unsafe extern "C" fn(
        device: ol_device_handle_t,
        kernel: ol_symbol_handle_t,
        shared_memory: usize,
        group_size: *mut usize,
    ) -> ol_result_t,
}

/// A symbol of LLVM 23's API that LLVM 22's library lacks.
const LLVM23_MARKER: &str = "olCreateContext";

/// An opened liboffload with its resolved entry points.
pub struct Library {
    /// Keeps the entry points valid.
    _library: libloading::Library,
    /// The file it was loaded from, links resolved (where known).
    pub path: PathBuf,
    pub generation: Generation,
    pub api: Api22,
}

/// The names tried when `OFFLOAD_LIBOFFLOAD` is unset: the versioned name of the release this
/// runtime speaks first (Debian's liboffload-22 installs only that one on the loader's path),
/// then the development link.
pub const CANDIDATES: &[&str] = &["libLLVMOffload.so.22.1", "libLLVMOffload.so"];

/// Opens liboffload: the file `OFFLOAD_LIBOFFLOAD` names if it is set, else the first of
/// [`CANDIDATES`] the loader finds. `Err` says why none can be used: not found, an unknown or
/// unsupported version, or a missing entry point.
pub fn open_default() -> Result<Library, String> {
    match std::env::var_os("OFFLOAD_LIBOFFLOAD").filter(|p| !p.is_empty()) {
        Some(path) => {
            open(Path::new(&path)).map_err(|e| format!("{e} (named by OFFLOAD_LIBOFFLOAD)"))
        }
        None => {
            let mut tried = Vec::new();
            for name in CANDIDATES {
                match open(Path::new(name)) {
                    Err(OpenError::NotFound(why)) => tried.push(why),
                    other => return other.map_err(|e| e.to_string()),
                }
            }
            Err(format!(
                "LLVM's liboffload is not installed ({}; set OFFLOAD_LIBOFFLOAD=/path/to/libLLVMOffload.so, or install liboffload-22)",
                tried.join("; ")
            ))
        }
    }
}

/// Why a library cannot be used.
#[derive(Debug)]
pub enum OpenError {
    NotFound(String),
    Unsupported(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NotFound(why) | OpenError::Unsupported(why) => f.write_str(why),
        }
    }
}

/// Opens one library (a path, or a bare name the loader searches for) and checks that it speaks
/// LLVM 22's API before any of its functions is called.
pub fn open(name: &Path) -> Result<Library, OpenError> {
    // SAFETY: loading runs the library's initialisers. liboffload's (and its libLLVM's) only
    // register static state; a file that is not liboffload is refused below before any of its
    // functions is called.
    let library = unsafe { libloading::Library::new(name) }.map_err(|e| {
        let why = std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string());
        OpenError::NotFound(format!("{}: {why}", name.display()))
    })?;
    let path = loaded_path(&library).unwrap_or_else(|| name.to_path_buf());
    let unsupported = |why: String| OpenError::Unsupported(format!("{}: {why}", path.display()));
    match release_of(&path) {
        Some(22) | None => {}
        Some(major) => {
            return Err(unsupported(format!(
                "liboffload of LLVM {major} is not supported (this build speaks LLVM 22's API)"
            )))
        }
    }
    // SAFETY: only looks the name up.
    if unsafe { library.get::<*const c_void>(LLVM23_MARKER.as_bytes()) }.is_ok() {
        return Err(unsupported(format!(
            "this liboffload has {LLVM23_MARKER}, so it speaks LLVM 23's API or newer, which is \
             not supported (this build speaks LLVM 22's)"
        )));
    }
    let api = resolve22(&library).map_err(|symbol| {
        unsupported(format!(
            "no symbol {symbol}: not a liboffload of LLVM 22 (or a damaged one)"
        ))
    })?;
    Ok(Library {
        _library: library,
        path,
        generation: Generation::Llvm22,
        api,
    })
}

/// Resolves every LLVM 22 entry point; `Err(name)` for the first one missing.
fn resolve22(library: &libloading::Library) -> Result<Api22, &'static str> {
    macro_rules! resolve {
        ($name:literal) => {
            // SAFETY: the symbol's type is the one `OffloadAPI.h` of LLVM 22 declares for it
            // (the field it is stored in), and the library stays loaded while `Api22` lives.
            *unsafe { library.get(concat!($name, "\0").as_bytes()) }.map_err(|_| $name)?
        };
    }
    Ok(Api22 {
        init: resolve!("olInit"),
        iterate_devices: resolve!("olIterateDevices"),
        get_device_info: resolve!("olGetDeviceInfo"),
        get_device_info_size: resolve!("olGetDeviceInfoSize"),
        get_platform_info: resolve!("olGetPlatformInfo"),
        get_platform_info_size: resolve!("olGetPlatformInfoSize"),
        create_queue: resolve!("olCreateQueue"),
        destroy_queue: resolve!("olDestroyQueue"),
        sync_queue: resolve!("olSyncQueue"),
        create_event: resolve!("olCreateEvent"),
        destroy_event: resolve!("olDestroyEvent"),
        sync_event: resolve!("olSyncEvent"),
        get_event_info: resolve!("olGetEventInfo"),
        wait_events: resolve!("olWaitEvents"),
        launch_host_function: resolve!("olLaunchHostFunction"),
        mem_alloc: resolve!("olMemAlloc"),
        mem_free: resolve!("olMemFree"),
        memcpy: resolve!("olMemcpy"),
        mem_fill: resolve!("olMemFill"),
        create_program: resolve!("olCreateProgram"),
        destroy_program: resolve!("olDestroyProgram"),
        is_valid_binary: resolve!("olIsValidBinary"),
        get_symbol: resolve!("olGetSymbol"),
        get_symbol_info: resolve!("olGetSymbolInfo"),
        launch_kernel: resolve!("olLaunchKernel"),
        calculate_optimal_occupancy: resolve!("olCalculateOptimalOccupancy"),
    })
}

/// The file the loader mapped for `library` (links resolved), found through an exported symbol.
fn loaded_path(library: &libloading::Library) -> Option<PathBuf> {
    // SAFETY: only looks a name up; `olInit` is exported by every liboffload.
    let symbol = unsafe { library.get::<*const c_void>(b"olInit\0") }.ok()?;
    let mut info: libc::Dl_info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: `symbol` is an address inside the loaded library; dladdr writes `info` only.
    if unsafe { libc::dladdr(*symbol, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
    let file = unsafe { CStr::from_ptr(info.dli_fname) };
    let file = PathBuf::from(file.to_str().ok()?);
    Some(std::fs::canonicalize(&file).unwrap_or(file))
}

/// The LLVM release in a library's file name (`libLLVMOffload.so.22.1` → 22); `None` for an
/// unversioned name.
pub fn release_of(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let (_, version) = name.split_once(".so.")?;
    version.split('.').next()?.parse().ok()
}

/// A NUL-terminated copy of `name`, for entry points that take C strings.
pub fn c_name(name: &str) -> CString {
    CString::new(name).expect("symbol names have no NUL byte")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_comes_from_the_file_name() {
        assert_eq!(
            release_of(Path::new("/usr/lib/llvm-22/lib/libLLVMOffload.so.22.1")),
            Some(22)
        );
        assert_eq!(release_of(Path::new("libLLVMOffload.so.23")), Some(23));
        assert_eq!(release_of(Path::new("libLLVMOffload.so")), None);
        assert_eq!(release_of(Path::new("/opt/x/libLLVMOffload.so.git")), None);
    }
}
