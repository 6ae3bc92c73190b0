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

    /// An argument cannot be passed to the kernel (a null raw pointer, say); nothing was launched.
    #[error("kernel `{kernel}`: argument `{argument}` {reason}")]
    InvalidArgument {
        kernel: &'static str,
        argument: &'static str,
        reason: &'static str,
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

    /// A driver call failed outside of a kernel.
    #[error("{device}: {operation} failed: {message}")]
    Driver {
        device: String,
        operation: &'static str,
        message: String,
    },
}
