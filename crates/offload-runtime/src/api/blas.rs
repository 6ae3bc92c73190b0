//! Level-1 BLAS on a stream scope's device data ([`DeviceSlice`]), queued on a [`Stream`] in
//! order with the kernels queued there (feature `cublas`): cuBLAS on a CUDA device, through
//! cudarc's bindings (libcublas is loaded at run time, as the driver is), and plain loops on the
//! host device, whose streams run each operation when it is queued. Scalars and results stay on
//! the device (cuBLAS's device pointer mode), so a loop of kernels and BLAS calls runs without
//! the host waiting; read a result with [`Stream::to_vec`].
//!
//! ```
//! # fn main() -> offload_runtime::Result<()> {
//! use offload_runtime::blas::Blas;
//! let (x, y) = (vec![1.0f64, 2.0, 3.0], vec![4.0f64, 5.0, 6.0]);
//! let device = offload_runtime::default_device()?;   // cuBLAS on a CUDA GPU, else loops
//! let (dot, y_after) = offload_runtime::scope(|s| {
//!     let stream = s.stream(&device)?;
//!     let blas = Blas::new(&stream)?;
//!     let (dx, dy) = (stream.upload(&x)?, stream.upload(&y)?);
//!     let scalars = stream.upload(&[2.0f64])?;           // alpha, on the device
//!     let result = stream.alloc_zeroed::<f64>(1)?;
//!     blas.axpy(scalars, dx, dy)?;                        // y += 2 x
//!     blas.dot(dx, dy, result)?;                          // x · y, left on the device
//!     // Kernels enqueued on `stream` here run in order with these calls.
//!     Ok((stream.to_vec(result)?[0], stream.to_vec(dy)?))
//! })?;
//! assert_eq!(y_after, [6.0, 9.0, 12.0]);
//! assert_eq!(dot, 6.0 + 18.0 + 36.0);
//! # Ok(())
//! # }
//! ```
//!
//! The same stream's [`Stream::native_queue`] and the slices' [`DeviceSlice::device_ptr`] let other
//! vendor libraries (cuFFT, cuSOLVER, ...) work on the data in that order too.
//!
//! Safe for the same reasons as kernel launches on device slices: the memory lives until the
//! scope ends, after the stream has finished; an operation that writes a slice another of its
//! operands overlaps is refused with `Err(InvalidArgument)`; unordered uses from two streams give
//! unspecified numbers, never a freed buffer.

use crate::api::device_slice::DeviceSlice;
use crate::api::stream::Stream;
use crate::mapping::device::{check_resident, Device};
use crate::plugins::NativeQueue;
use crate::{Error, Result};
use cudarc::cublas::sys as cublas;
use offload_kernel::DeviceCopy;
use std::ffi::c_void;
use std::mem::size_of;

/// BLAS operations queued on one stream; see the module docs. Made by [`Blas::new`].
pub struct Blas<'scope> {
    /// The stream the calls are queued on: its device, and whether it is recording a graph.
    stream: Stream<'scope>,
    engine: Engine,
}

enum Engine {
    /// A cuBLAS handle bound to the stream, in device pointer mode, and the stream's context.
    Cublas {
        handle: cublas::cublasHandle_t,
        context: *mut c_void,
    },
    /// The host device: operations run when called.
    Host,
}

/// The element types BLAS computes on: `f32` and `f64`.
pub trait BlasElement: DeviceCopy + sealed::Sealed {}
impl BlasElement for f32 {}
impl BlasElement for f64 {}

mod sealed {
    use super::cublas::{cublasHandle_t, cublasStatus_t};

    /// cuBLAS's routine for each operation, and the host loop.
    pub trait Sealed: Copy + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
        const ZERO: Self;
        /// # Safety
        /// cuBLAS's contract: live handle; `n` elements at `x`, `y`; one at `result`.
        unsafe fn dot(
            h: cublasHandle_t,
            n: i64,
            x: *const Self,
            y: *const Self,
            result: *mut Self,
        ) -> cublasStatus_t;
        /// # Safety
        /// As `dot`, with one element at `alpha`.
        unsafe fn axpy(
            h: cublasHandle_t,
            n: i64,
            alpha: *const Self,
            x: *const Self,
            y: *mut Self,
        ) -> cublasStatus_t;
        /// # Safety
        /// As `axpy`.
        unsafe fn scal(
            h: cublasHandle_t,
            n: i64,
            alpha: *const Self,
            x: *mut Self,
        ) -> cublasStatus_t;
    }

    macro_rules! routines {
        ($t:ty, $dot:ident, $axpy:ident, $scal:ident) => {
            impl Sealed for $t {
                const ZERO: Self = 0.0;
                unsafe fn dot(
                    h: cublasHandle_t,
                    n: i64,
                    x: *const Self,
                    y: *const Self,
                    result: *mut Self,
                ) -> cublasStatus_t {
                    // SAFETY: the caller's contract is cuBLAS's.
                    unsafe { super::cublas::$dot(h, n, x, 1, y, 1, result) }
                }
                unsafe fn axpy(
                    h: cublasHandle_t,
                    n: i64,
                    alpha: *const Self,
                    x: *const Self,
                    y: *mut Self,
                ) -> cublasStatus_t {
                    // SAFETY: as for `dot`.
                    unsafe { super::cublas::$axpy(h, n, alpha, x, 1, y, 1) }
                }
                unsafe fn scal(
                    h: cublasHandle_t,
                    n: i64,
                    alpha: *const Self,
                    x: *mut Self,
                ) -> cublasStatus_t {
                    // SAFETY: as for `dot`.
                    unsafe { super::cublas::$scal(h, n, alpha, x, 1) }
                }
            }
        };
    }
    routines!(f32, cublasSdot_v2_64, cublasSaxpy_v2_64, cublasSscal_v2_64);
    routines!(f64, cublasDdot_v2_64, cublasDaxpy_v2_64, cublasDscal_v2_64);
}

impl<'scope> Blas<'scope> {
    /// BLAS on `stream`: a cuBLAS handle bound to it on a CUDA device (through the CUDA plugin),
    /// loops on the host device. `Err(NoDevice)` on other plugins (liboffload does not reveal
    /// its CUDA stream) and when libcublas cannot be loaded (it is searched for as
    /// `libcublas.so`, `libcublas.so.12`, …, where the dynamic loader looks: add CUDA's
    /// `lib64` to `LD_LIBRARY_PATH`).
    pub fn new(stream: &Stream<'scope>) -> Result<Self> {
        let device = stream.device().clone();
        let engine = match stream.native_queue() {
            None if device.memory_is_host() => Engine::Host,
            Some(NativeQueue::Cuda { context, stream }) => cublas_engine(&device, context, stream)?,
            _ => {
                return Err(Error::NoDevice(format!(
                    "cuBLAS needs a stream of a CUDA device driven by the CUDA plugin; this one \
                     is on {} ({:?} plugin)",
                    device.name(),
                    device.kind()
                )))
            }
        };
        Ok(Blas {
            stream: stream.another(),
            engine,
        })
    }

    /// `result[0] = x · y`, queued (`result` one element: a [`DeviceSlice::slice`] of a vector
    /// of scalars, say). `x` and `y` have the same length.
    pub fn dot<T: BlasElement>(
        &self,
        x: DeviceSlice<'scope, T>,
        y: DeviceSlice<'scope, T>,
        result: DeviceSlice<'scope, T>,
    ) -> Result<()> {
        self.check("offload::Blas::dot", &[x, y], result, (x, y), result)?;
        self.run(
            "cublas<t>dot",
            // SAFETY: each slice holds the elements cuBLAS reaches (checked above) until the
            // scope ends, after the stream has run the call.
            |handle| unsafe {
                T::dot(
                    handle,
                    x.len() as i64,
                    x.device_ptr() as *const T,
                    y.device_ptr() as *const T,
                    result.device_ptr() as *mut T,
                )
            },
            || {
                // SAFETY: host memory of the scope, as long as checked; `result` overlaps
                // neither (checked), and the host device's stream work has all run.
                let (x, y) = unsafe { (host(x), host(y)) };
                let sum = x.iter().zip(y).fold(T::ZERO, |s, (&a, &b)| s + a * b);
                // SAFETY: as above.
                unsafe { *(result.device_ptr() as *mut T) = sum };
            },
        )
    }

    /// `y += alpha[0] · x`, queued (`alpha` one element on the device).
    pub fn axpy<T: BlasElement>(
        &self,
        alpha: DeviceSlice<'scope, T>,
        x: DeviceSlice<'scope, T>,
        y: DeviceSlice<'scope, T>,
    ) -> Result<()> {
        self.check("offload::Blas::axpy", &[alpha, x], y, (x, y), alpha)?;
        self.run(
            "cublas<t>axpy",
            // SAFETY: as in `dot`.
            |handle| unsafe {
                T::axpy(
                    handle,
                    y.len() as i64,
                    alpha.device_ptr() as *const T,
                    x.device_ptr() as *const T,
                    y.device_ptr() as *mut T,
                )
            },
            || {
                // SAFETY: as in `dot`; `y` overlaps neither input (checked).
                let (a, x, y) = unsafe { (host(alpha)[0], host(x), host_mut(y)) };
                for (y, &x) in y.iter_mut().zip(x) {
                    *y = *y + a * x;
                }
            },
        )
    }

    /// `x *= alpha[0]`, queued (`alpha` one element on the device).
    pub fn scal<T: BlasElement>(
        &self,
        alpha: DeviceSlice<'scope, T>,
        x: DeviceSlice<'scope, T>,
    ) -> Result<()> {
        self.check("offload::Blas::scal", &[alpha], x, (x, x), alpha)?;
        self.run(
            "cublas<t>scal",
            // SAFETY: as in `dot`.
            |handle| unsafe {
                T::scal(
                    handle,
                    x.len() as i64,
                    alpha.device_ptr() as *const T,
                    x.device_ptr() as *mut T,
                )
            },
            || {
                // SAFETY: as in `dot`; `x` does not overlap `alpha` (checked).
                let (a, x) = unsafe { (host(alpha)[0], host_mut(x)) };
                x.iter_mut().for_each(|x| *x = *x * a);
            },
        )
    }

    /// The stream not recording a graph (whose replays would not order the call), every operand
    /// on the stream's device, `pairs` of equal lengths, `scalars` of one element, and `written`
    /// overlapping none of `inputs`.
    fn check<T: BlasElement>(
        &self,
        what: &'static str,
        inputs: &[DeviceSlice<'scope, T>],
        written: DeviceSlice<'scope, T>,
        pair: (DeviceSlice<'scope, T>, DeviceSlice<'scope, T>),
        scalar: DeviceSlice<'scope, T>,
    ) -> Result<()> {
        self.stream.refuse_while_recording(what)?;
        let device = self.stream.device();
        for slice in inputs.iter().chain([&written]) {
            check_resident(what, device, slice.device_id)?;
        }
        if pair.0.len() != pair.1.len() {
            return Err(Error::LengthMismatch {
                what,
                expected: pair.0.len(),
                found: pair.1.len(),
            });
        }
        if scalar.len() != 1 {
            return Err(Error::LengthMismatch {
                what,
                expected: 1,
                found: scalar.len(),
            });
        }
        let bytes = |s: &DeviceSlice<'_, T>| s.addr..s.addr + (s.len() * size_of::<T>()) as u64;
        let out = bytes(&written);
        for input in inputs {
            let range = bytes(input);
            if !input.is_empty() && range.start < out.end && out.start < range.end {
                return Err(Error::InvalidArgument {
                    kernel: what,
                    argument: "the written operand",
                    reason: "shares device memory with another operand: pass separate device data"
                        .to_string(),
                });
            }
        }
        Ok(())
    }

    /// Runs one operation: on cuBLAS, `on_cublas` (cuBLAS's `operation`) with the handle and
    /// the stream's context current on this thread; on the host device, `on_host`.
    fn run(
        &self,
        operation: &'static str,
        on_cublas: impl FnOnce(cublas::cublasHandle_t) -> cublas::cublasStatus_t,
        on_host: impl FnOnce(),
    ) -> Result<()> {
        match self.engine {
            Engine::Cublas { handle, context } => {
                let device = self.stream.device();
                bind(device, context)?;
                checked(device, operation, on_cublas(handle))
            }
            Engine::Host => {
                on_host();
                Ok(())
            }
        }
    }
}

impl Drop for Blas<'_> {
    fn drop(&mut self) {
        if let Engine::Cublas { handle, context } = self.engine {
            if bind(self.stream.device(), context).is_ok() {
                // SAFETY: created by `cublas_engine`, used by no one after this.
                let _ = unsafe { cublas::cublasDestroy_v2(handle) };
            }
        }
    }
}

/// A cuBLAS handle on `stream` of `context`, in device pointer mode.
fn cublas_engine(device: &Device, context: *mut c_void, stream: *mut c_void) -> Result<Engine> {
    // SAFETY: only tries to open the library.
    if !unsafe { cublas::is_culib_present() } {
        return Err(Error::NoDevice(
            "cuBLAS (libcublas.so) was not found by the dynamic loader: add the CUDA toolkit's \
             lib64 (or a cuBLAS wheel's lib folder) to LD_LIBRARY_PATH"
                .to_string(),
        ));
    }
    bind(device, context)?;
    let mut handle = std::ptr::null_mut();
    // SAFETY: the library is present; the context is current; `handle` is written on success.
    let status = unsafe { cublas::cublasCreate_v2(&mut handle) };
    checked(device, "cublasCreate", status)?;
    let engine = Engine::Cublas { handle, context };
    // SAFETY: a live handle; the stream belongs to the current context and outlives the handle
    // (both end with the scope, the handle first: `Blas` borrows the scope).
    let status = unsafe { cublas::cublasSetStream_v2(handle, stream as cublas::cudaStream_t) };
    let configured = checked(device, "cublasSetStream", status).and_then(|()| {
        let device_pointers = cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE;
        // SAFETY: a live handle.
        let status = unsafe { cublas::cublasSetPointerMode_v2(handle, device_pointers) };
        checked(device, "cublasSetPointerMode", status)
    });
    if let Err(e) = configured {
        // SAFETY: created above, used by no one.
        let _ = unsafe { cublas::cublasDestroy_v2(handle) };
        return Err(e);
    }
    Ok(engine)
}

/// A cuBLAS call's `status`: a failure is `Error::Driver`, naming `operation` on `device`.
fn checked(device: &Device, operation: &'static str, status: cublas::cublasStatus_t) -> Result<()> {
    match status {
        cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
        status => Err(Error::Driver {
            device: device.name().to_string(),
            operation,
            message: format!("{status:?}"),
        }),
    }
}

/// Makes `context` current on this thread: cuBLAS works in the current context.
fn bind(device: &Device, context: *mut c_void) -> Result<()> {
    // SAFETY: the device's primary context, retained by the CUDA plugin while the device lives.
    unsafe { cudarc::driver::result::ctx::set_current(context as cudarc::driver::sys::CUcontext) }
        .map_err(|e| Error::Driver {
            device: device.name().to_string(),
            operation: "binding the context for cuBLAS",
            message: e.to_string(),
        })
}

/// The elements of a host-device slice.
///
/// # Safety
/// `s` is memory of the host device, live and not written during the borrow.
unsafe fn host<'a, T: DeviceCopy>(s: DeviceSlice<'_, T>) -> &'a [T] {
    match s.len() {
        0 => &[],
        // SAFETY: per the contract.
        n => unsafe { std::slice::from_raw_parts(s.device_ptr() as *const T, n) },
    }
}

/// As [`host`], mutably.
///
/// # Safety
/// `s` is memory of the host device, live and reached by nothing else during the borrow.
unsafe fn host_mut<'a, T: DeviceCopy>(s: DeviceSlice<'_, T>) -> &'a mut [T] {
    match s.len() {
        0 => &mut [],
        // SAFETY: per the contract.
        n => unsafe { std::slice::from_raw_parts_mut(s.device_ptr() as *mut T, n) },
    }
}
