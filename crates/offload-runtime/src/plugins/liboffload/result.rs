//! The checked layer over [`sys`]: each liboffload call, its `ol_result_t` turned into
//! `Result<_, OlError>` carrying liboffload's own message, and its out-parameters into return
//! values. Handles stay raw here; [`super::device`] owns them.

use crate::plugins::liboffload::sys::{self, Api22};
use std::ffi::{c_void, CStr};
use std::fmt;
use std::mem::{size_of, MaybeUninit};

/// A failed liboffload call: its error code and liboffload's description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OlError {
    pub code: sys::ol_errc_t,
    pub message: String,
}

impl OlError {
    /// Whether an allocation failed for want of memory. liboffload 22's CUDA plugin passes the
    /// driver's words on with an unknown-error code (`error in cuMemAlloc[Host|Managed]: out of
    /// memory`, seen on the H200); others use the code of exhausted resources.
    pub fn is_out_of_memory(&self) -> bool {
        self.code == sys::OL_ERRC_OUT_OF_RESOURCES || self.message.contains("out of memory")
    }
}

impl fmt::Display for OlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (liboffload error {})", self.message, self.code)
    }
}

/// `Ok` for a null result, else the error it points at.
fn check(result: sys::ol_result_t) -> Result<(), OlError> {
    if result.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null ol_result_t points at an error that liboffload keeps alive.
    let error = unsafe { &*result };
    let message = if error.details.is_null() {
        "no details".to_string()
    } else {
        // SAFETY: `details` is a NUL-terminated string owned by the error.
        unsafe { CStr::from_ptr(error.details) }
            .to_string_lossy()
            .into_owned()
    };
    Err(OlError {
        code: error.code,
        message,
    })
}

/// liboffload's LLVM 22 entry points with checked results. `Copy`: it is a reference to the
/// table of a library that stays loaded for the life of the process.
#[derive(Clone, Copy)]
pub struct Ol(pub &'static Api22);

impl Ol {
    pub fn init(self) -> Result<(), OlError> {
        // SAFETY: olInit takes no arguments and may be called more than once.
        check(unsafe { (self.0.init)() })
    }

    /// Every device liboffload lists, in its order (the host placeholder included).
    pub fn devices(self) -> Result<Vec<sys::ol_device_handle_t>, OlError> {
        unsafe extern "C" fn collect(device: sys::ol_device_handle_t, user: *mut c_void) -> bool {
            // SAFETY: `user` is the `Vec` below, alive and otherwise untouched during the call.
            unsafe { (*(user as *mut Vec<sys::ol_device_handle_t>)).push(device) };
            true
        }
        let mut found: Vec<sys::ol_device_handle_t> = Vec::new();
        // SAFETY: the callback matches ol_device_iterate_cb_t and only pushes into `found`,
        // which outlives the (synchronous) iteration.
        check(unsafe {
            (self.0.iterate_devices)(collect, &mut found as *mut Vec<_> as *mut c_void)
        })?;
        Ok(found)
    }

    /// A fixed-size device property.
    ///
    /// # Safety
    /// `device` is a live device handle and `T` is the type liboffload writes for `prop`.
    pub unsafe fn device_info<T: Copy>(
        self,
        device: sys::ol_device_handle_t,
        prop: sys::ol_device_info_t,
    ) -> Result<T, OlError> {
        let mut value = MaybeUninit::<T>::uninit();
        // SAFETY: per the contract; liboffload writes at most `size_of::<T>()` bytes.
        check(unsafe {
            (self.0.get_device_info)(
                device,
                prop,
                size_of::<T>(),
                value.as_mut_ptr() as *mut c_void,
            )
        })?;
        // SAFETY: the call succeeded, so it wrote a `T`.
        Ok(unsafe { value.assume_init() })
    }

    /// A string device property.
    ///
    /// # Safety
    /// `device` is a live device handle and `prop` is a string property.
    pub unsafe fn device_info_string(
        self,
        device: sys::ol_device_handle_t,
        prop: sys::ol_device_info_t,
    ) -> Result<String, OlError> {
        let mut size = 0usize;
        // SAFETY: per the contract; writes the size only.
        check(unsafe { (self.0.get_device_info_size)(device, prop, &mut size) })?;
        let mut bytes = vec![0u8; size.max(1)];
        // SAFETY: `bytes` holds the `size` bytes liboffload asked for.
        check(unsafe {
            (self.0.get_device_info)(device, prop, bytes.len(), bytes.as_mut_ptr() as *mut c_void)
        })?;
        Ok(text(&bytes))
    }

    /// The backend (`ol_platform_backend_t`) of the platform `device` belongs to. Safe to ask of
    /// every device, the host placeholder included.
    ///
    /// # Safety
    /// `device` is a live device handle.
    pub unsafe fn platform_backend(
        self,
        device: sys::ol_device_handle_t,
    ) -> Result<sys::ol_platform_backend_t, OlError> {
        // SAFETY: per the contract; the platform property is a handle.
        let platform: sys::ol_platform_handle_t =
            unsafe { self.device_info(device, sys::OL_DEVICE_INFO_PLATFORM)? };
        let mut backend: sys::ol_platform_backend_t = 0;
        // SAFETY: `platform` came from liboffload; the backend property is a u32 enumeration.
        check(unsafe {
            (self.0.get_platform_info)(
                platform,
                sys::OL_PLATFORM_INFO_BACKEND,
                size_of::<sys::ol_platform_backend_t>(),
                &mut backend as *mut _ as *mut c_void,
            )
        })?;
        Ok(backend)
    }

    /// The API version string of `device`'s platform (`v0.0.1` in LLVM 22).
    ///
    /// # Safety
    /// `device` is a live device handle.
    pub unsafe fn platform_version(
        self,
        device: sys::ol_device_handle_t,
    ) -> Result<String, OlError> {
        // SAFETY: per the contract.
        let platform: sys::ol_platform_handle_t =
            unsafe { self.device_info(device, sys::OL_DEVICE_INFO_PLATFORM)? };
        let mut size = 0usize;
        // SAFETY: a platform handle from liboffload; writes the size only.
        check(unsafe {
            (self.0.get_platform_info_size)(platform, sys::OL_PLATFORM_INFO_VERSION, &mut size)
        })?;
        let mut bytes = vec![0u8; size.max(1)];
        // SAFETY: `bytes` holds the size liboffload asked for.
        check(unsafe {
            (self.0.get_platform_info)(
                platform,
                sys::OL_PLATFORM_INFO_VERSION,
                bytes.len(),
                bytes.as_mut_ptr() as *mut c_void,
            )
        })?;
        Ok(text(&bytes))
    }

    /// # Safety
    /// `device` is a live GPU device handle (never the host placeholder: liboffload 22 crashes).
    pub unsafe fn create_queue(
        self,
        device: sys::ol_device_handle_t,
    ) -> Result<sys::ol_queue_handle_t, OlError> {
        let mut queue = std::ptr::null_mut();
        // SAFETY: per the contract.
        check(unsafe { (self.0.create_queue)(device, &mut queue) })?;
        Ok(queue)
    }

    /// # Safety
    /// `queue` is live and not used afterwards.
    pub unsafe fn destroy_queue(self, queue: sys::ol_queue_handle_t) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.destroy_queue)(queue) })
    }

    /// # Safety
    /// `queue` is live.
    pub unsafe fn sync_queue(self, queue: sys::ol_queue_handle_t) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.sync_queue)(queue) })
    }

    /// # Safety
    /// `queue` is live.
    pub unsafe fn create_event(
        self,
        queue: sys::ol_queue_handle_t,
    ) -> Result<sys::ol_event_handle_t, OlError> {
        let mut event = std::ptr::null_mut();
        // SAFETY: per the contract.
        check(unsafe { (self.0.create_event)(queue, &mut event) })?;
        Ok(event)
    }

    /// # Safety
    /// `event` is live and not used afterwards.
    pub unsafe fn destroy_event(self, event: sys::ol_event_handle_t) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.destroy_event)(event) })
    }

    /// # Safety
    /// `event` is live.
    pub unsafe fn sync_event(self, event: sys::ol_event_handle_t) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.sync_event)(event) })
    }

    /// Whether the work before `event` has completed, without waiting.
    ///
    /// # Safety
    /// `event` is live.
    pub unsafe fn event_complete(self, event: sys::ol_event_handle_t) -> Result<bool, OlError> {
        let mut complete = false;
        // SAFETY: per the contract; the property is a bool.
        check(unsafe {
            (self.0.get_event_info)(
                event,
                sys::OL_EVENT_INFO_IS_COMPLETE,
                size_of::<bool>(),
                &mut complete as *mut bool as *mut c_void,
            )
        })?;
        Ok(complete)
    }

    /// # Safety
    /// `queue` and `event` are live, of the same device.
    pub unsafe fn wait_event(
        self,
        queue: sys::ol_queue_handle_t,
        event: sys::ol_event_handle_t,
    ) -> Result<(), OlError> {
        let mut events = [event];
        // SAFETY: per the contract; the array outlives the call.
        check(unsafe { (self.0.wait_events)(queue, events.as_mut_ptr(), 1) })
    }

    /// Queue a call of `callback(user_data)` on the host once the queue reaches it.
    ///
    /// # Safety
    /// `queue` is live; `callback` may run on any thread, once, and `user_data` stays valid
    /// until it has.
    pub unsafe fn launch_host_function(
        self,
        queue: sys::ol_queue_handle_t,
        callback: sys::ol_host_function_cb_t,
        user_data: *mut c_void,
    ) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.launch_host_function)(queue, callback, user_data) })
    }

    /// # Safety
    /// `device` is a live GPU device handle (never the host placeholder).
    pub unsafe fn mem_alloc(
        self,
        device: sys::ol_device_handle_t,
        kind: sys::ol_alloc_type_t,
        bytes: usize,
    ) -> Result<*mut c_void, OlError> {
        let mut allocation = std::ptr::null_mut();
        // SAFETY: per the contract.
        check(unsafe { (self.0.mem_alloc)(device, kind, bytes, &mut allocation) })?;
        Ok(allocation)
    }

    /// # Safety
    /// `address` came from `mem_alloc`, no queued work uses it, and it is not used afterwards.
    pub unsafe fn mem_free(self, address: *mut c_void) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.mem_free)(address) })
    }

    /// Queue a copy of `bytes` bytes (or do it now with a null `queue`).
    ///
    /// # Safety
    /// Each pointer holds `bytes` bytes on its device (the host placeholder for host memory),
    /// and stays valid until the queue has synchronized.
    pub unsafe fn memcpy(
        self,
        queue: sys::ol_queue_handle_t,
        dst: *mut c_void,
        dst_device: sys::ol_device_handle_t,
        src: *const c_void,
        src_device: sys::ol_device_handle_t,
        bytes: usize,
    ) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.memcpy)(queue, dst, dst_device, src, src_device, bytes) })
    }

    /// Queue zeroing `bytes` bytes of device memory.
    ///
    /// # Safety
    /// `queue` is live and `ptr` holds `bytes` bytes of its device's memory.
    pub unsafe fn mem_zero(
        self,
        queue: sys::ol_queue_handle_t,
        ptr: *mut c_void,
        bytes: usize,
    ) -> Result<(), OlError> {
        let zero = 0u8;
        // SAFETY: per the contract; liboffload copies the one-byte pattern before returning.
        check(unsafe {
            (self.0.mem_fill)(queue, ptr, 1, &zero as *const u8 as *const c_void, bytes)
        })
    }

    /// Whether `device` can load `image` (a cubin or HSA code object for it).
    ///
    /// # Safety
    /// `device` is a live GPU device handle.
    pub unsafe fn is_valid_binary(
        self,
        device: sys::ol_device_handle_t,
        image: &[u8],
    ) -> Result<bool, OlError> {
        let mut valid = false;
        // SAFETY: per the contract; `image` is alive for the call.
        check(unsafe {
            (self.0.is_valid_binary)(
                device,
                image.as_ptr() as *const c_void,
                image.len(),
                &mut valid,
            )
        })?;
        Ok(valid)
    }

    /// Load `image` on `device` (liboffload keeps its own copy).
    ///
    /// # Safety
    /// `device` is a live GPU device handle.
    pub unsafe fn create_program(
        self,
        device: sys::ol_device_handle_t,
        image: &[u8],
    ) -> Result<sys::ol_program_handle_t, OlError> {
        let mut program = std::ptr::null_mut();
        // SAFETY: per the contract; `image` is alive for the call.
        check(unsafe {
            (self.0.create_program)(
                device,
                image.as_ptr() as *const c_void,
                image.len(),
                &mut program,
            )
        })?;
        Ok(program)
    }

    /// # Safety
    /// `program` is live, nothing queued uses it, and neither it nor its symbols are used
    /// afterwards.
    pub unsafe fn destroy_program(self, program: sys::ol_program_handle_t) -> Result<(), OlError> {
        // SAFETY: per the contract.
        check(unsafe { (self.0.destroy_program)(program) })
    }

    /// # Safety
    /// `program` is live.
    pub unsafe fn get_symbol(
        self,
        program: sys::ol_program_handle_t,
        name: &str,
        kind: sys::ol_symbol_kind_t,
    ) -> Result<sys::ol_symbol_handle_t, OlError> {
        let name = sys::c_name(name);
        let mut symbol = std::ptr::null_mut();
        // SAFETY: per the contract; `name` is NUL-terminated and alive for the call.
        check(unsafe { (self.0.get_symbol)(program, name.as_ptr(), kind, &mut symbol) })?;
        Ok(symbol)
    }

    /// A global variable's device address and size.
    ///
    /// # Safety
    /// `symbol` is a live global-variable symbol.
    pub unsafe fn global_address_and_size(
        self,
        symbol: sys::ol_symbol_handle_t,
    ) -> Result<(*mut c_void, usize), OlError> {
        let mut address: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: per the contract; the address property is a pointer, the size a size_t.
        unsafe {
            check((self.0.get_symbol_info)(
                symbol,
                sys::OL_SYMBOL_INFO_GLOBAL_VARIABLE_ADDRESS,
                size_of::<*mut c_void>(),
                &mut address as *mut _ as *mut c_void,
            ))?;
            check((self.0.get_symbol_info)(
                symbol,
                sys::OL_SYMBOL_INFO_GLOBAL_VARIABLE_SIZE,
                size_of::<usize>(),
                &mut size as *mut usize as *mut c_void,
            ))?;
        }
        Ok((address, size))
    }

    /// Queue a launch of `kernel` with its packed parameter buffer.
    ///
    /// # Safety
    /// `queue`, `device` and `kernel` are live and belong together; `arguments` is laid out as
    /// the kernel's parameters and every pointer in it is valid for what the kernel does.
    pub unsafe fn launch_kernel(
        self,
        queue: sys::ol_queue_handle_t,
        device: sys::ol_device_handle_t,
        kernel: sys::ol_symbol_handle_t,
        arguments: &[u8],
        size: &sys::ol_kernel_launch_size_args_t,
    ) -> Result<(), OlError> {
        // SAFETY: per the contract; liboffload copies the arguments at launch.
        check(unsafe {
            (self.0.launch_kernel)(
                queue,
                device,
                kernel,
                arguments.as_ptr() as *const c_void,
                arguments.len(),
                size,
            )
        })
    }

    /// The block size liboffload's occupancy calculation picks for `kernel`.
    ///
    /// # Safety
    /// `device` and `kernel` are live and belong together.
    pub unsafe fn optimal_group_size(
        self,
        device: sys::ol_device_handle_t,
        kernel: sys::ol_symbol_handle_t,
        dynamic_shared: usize,
    ) -> Result<usize, OlError> {
        let mut size = 0usize;
        // SAFETY: per the contract.
        check(unsafe {
            (self.0.calculate_optimal_occupancy)(device, kernel, dynamic_shared, &mut size)
        })?;
        Ok(size)
    }
}

/// A C string property's bytes up to its NUL.
fn text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
