//! [`Error`]: everything a launch or a device operation can fail with.

use thiserror::Error;

/// What every fallible operation of offload returns.
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
        /// The kernel (or the operation, such as `offload::DeviceVec`) it concerns.
        kernel: &'static str,
        /// The device's name.
        device: String,
        /// Why: no image was built (and why), or the driver's message.
        reason: String,
    },

    /// The launch shape is invalid for the device; nothing was copied or launched.
    #[error("invalid launch of kernel `{kernel}` on {device}: {reason}")]
    InvalidLaunch {
        /// The kernel (or the operation, such as `offload::DeviceVec`) it concerns.
        kernel: &'static str,
        /// The device's name.
        device: String,
        /// What is wrong, naming the limit it breaks.
        reason: String,
    },

    /// An argument cannot be passed to the kernel (a null raw pointer, device memory that
    /// another argument writes, say); nothing was launched.
    #[error("kernel `{kernel}`: argument `{argument}` {reason}")]
    InvalidArgument {
        /// The kernel (or the operation, such as `offload::DeviceVec`) it concerns.
        kernel: &'static str,
        /// The parameter's name.
        argument: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// The device has not enough free memory for the launch's data.
    #[error("out of memory on {device}: {bytes} bytes requested for kernel `{kernel}`")]
    OutOfMemory {
        /// The kernel (or the operation, such as `offload::DeviceVec`) it concerns.
        kernel: &'static str,
        /// The device's name.
        device: String,
        /// How many bytes the allocation asked for.
        bytes: usize,
    },

    /// A kernel thread panicked (host backend) or the kernel faulted on the device.
    #[error("kernel `{kernel}` failed on {device}: {message}")]
    KernelFailed {
        /// The kernel (or the operation, such as `offload::DeviceVec`) it concerns.
        kernel: &'static str,
        /// The device's name.
        device: String,
        /// The panic message and where it happened, or the driver's error.
        message: String,
    },

    /// The device was released with [`Device::release`](crate::Device::release): it runs and
    /// allocates nothing more.
    #[error("{device} was released: it runs and allocates nothing more")]
    Released {
        /// The device's name.
        device: String,
    },

    /// A new mapping of host data covers part of an existing one, but not all of it (or more).
    /// OpenMP rejects this too: one host byte has one device copy.
    #[error("cannot map {bytes} bytes at host {host:#x} on {device}: they partially overlap the mapped {mapped_bytes} bytes at {mapped_host:#x}")]
    MapOverlap {
        /// The device's name.
        device: String,
        /// Host address of the new mapping.
        host: usize,
        /// Its size in bytes.
        bytes: usize,
        /// Host address of the mapping it overlaps.
        mapped_host: usize,
        /// That mapping's size in bytes.
        mapped_bytes: usize,
    },

    /// `present` data that no data region has mapped on the device.
    #[error("{bytes} bytes at host {host:#x} are not present on {device}: map them in a data region (offload::region) first")]
    NotPresent {
        /// The device's name.
        device: String,
        /// Host address of the data.
        host: usize,
        /// Its size in bytes.
        bytes: usize,
    },

    /// A device-resident argument (a `DeviceVec`, a region's mapped handle) lives on another
    /// device than the launch's.
    #[error("kernel `{kernel}` launched on {device}, but an argument lives on {resident_on}")]
    WrongDevice {
        /// The kernel (or the operation, such as `offload::DeviceVec`) it concerns.
        kernel: &'static str,
        /// The device's name.
        device: String,
        /// The name of the device the argument lives on.
        resident_on: String,
    },

    /// Two lengths that must agree do not.
    #[error("{what}: expected {expected} elements, got {found}")]
    LengthMismatch {
        /// The operation.
        what: &'static str,
        /// The length it needs.
        expected: usize,
        /// The length it was given.
        found: usize,
    },

    /// A copy names elements past the end of device data.
    #[error("{what}: elements {start}..{end} are out of range: it holds {len}")]
    OutOfRange {
        /// The operation.
        what: &'static str,
        /// First element asked for.
        start: usize,
        /// One past the last element asked for.
        end: usize,
        /// How many elements there are.
        len: usize,
    },

    /// A driver call failed outside of a kernel.
    #[error("{device}: {operation} failed: {message}")]
    Driver {
        /// The device's name.
        device: String,
        /// The driver operation.
        operation: &'static str,
        /// The driver's error.
        message: String,
    },
}
