use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a launch or a device operation can fail with. Host data handed to a failed launch
/// is left as it was before the call.
#[derive(Debug, Error)]
pub enum Error {
    /// No device of the kind that was asked for (or required) is available.
    #[error("no usable device: {0}")]
    NoDevice(String),

    /// The device cannot run this kernel: no image was built for it, or the driver rejected it.
    #[error("kernel `{kernel}` cannot run on {device}: {reason}")]
    NoImage {
        kernel: &'static str,
        device: String,
        reason: String,
    },

    /// The launch shape is invalid for the device; nothing was copied or launched.
    #[error("invalid launch of kernel `{kernel}` on {device}: {reason}")]
    InvalidLaunch {
        kernel: &'static str,
        device: String,
        reason: String,
    },

    /// An argument cannot be passed to the kernel (a null raw pointer, device memory that
    /// another argument writes, say); nothing was launched.
    #[error("kernel `{kernel}`: argument `{argument}` {reason}")]
    InvalidArgument {
        kernel: &'static str,
        argument: &'static str,
        reason: String,
    },

    /// The device has not enough free memory for the launch's data.
    #[error("out of memory on {device}: {bytes} bytes requested for kernel `{kernel}`")]
    OutOfMemory {
        kernel: &'static str,
        device: String,
        bytes: usize,
    },

    /// A kernel thread panicked (host backend) or the kernel faulted on the device.
    #[error("kernel `{kernel}` failed on {device}: {message}")]
    KernelFailed {
        kernel: &'static str,
        device: String,
        message: String,
    },

    /// The device was released with [`Device::release`](crate::Device::release): it runs and
    /// allocates nothing more.
    #[error("{device} was released: it runs and allocates nothing more")]
    Released { device: String },

    /// A new mapping of host data covers part of an existing one, but not all of it (or more).
    /// OpenMP rejects this too: one host byte has one device copy.
    #[error("cannot map {bytes} bytes at host {host:#x} on {device}: they partially overlap the mapped {mapped_bytes} bytes at {mapped_host:#x}")]
    MapOverlap {
        device: String,
        host: usize,
        bytes: usize,
        mapped_host: usize,
        mapped_bytes: usize,
    },

    /// `present` data that no data region has mapped on the device.
    #[error("{bytes} bytes at host {host:#x} are not present on {device}: map them in a data region (offload::region) first")]
    NotPresent {
        device: String,
        host: usize,
        bytes: usize,
    },

    /// A device-resident argument (a `DeviceVec`, a region's mapped handle) lives on another
    /// device than the launch's.
    #[error("kernel `{kernel}` launched on {device}, but an argument lives on {resident_on}")]
    WrongDevice {
        kernel: &'static str,
        device: String,
        resident_on: String,
    },

    /// Two lengths that must agree do not.
    #[error("{what}: expected {expected} elements, got {found}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        found: usize,
    },

    /// A driver call failed outside of a kernel.
    #[error("{device}: {operation} failed: {message}")]
    Driver {
        device: String,
        operation: &'static str,
        message: String,
    },
}
