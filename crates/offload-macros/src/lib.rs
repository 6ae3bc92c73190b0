//! Proc macros of `offload`. `#[kernel]` turns one ordinary Rust function into a device entry
//! point (nvptx64), a host-backend entry, and a typed launcher; `#[derive(DeviceCopy)]` vouches
//! that a `#[repr(C)]` struct can be copied to the device.

mod device_copy;
mod kernel;
mod params;

use proc_macro::TokenStream;

/// Make a function an offload kernel.
///
/// Parameters may be scalars and `#[repr(C)]` structs implementing `DeviceCopy` (by value),
/// `&[T]` (copied to the device, read-only) and `&mut [T]` (copied to the device and back; seen
/// in the body as an `offload::ThreadSlice<T>`, which lets each thread reach only its own
/// elements). The function must return nothing and have no generic parameters.
///
/// Generated next to the function, on the host: `fn NAME(args…) -> offload::Result<()>`, which
/// launches with a grid sized from the data on the default device, and a module `NAME` with
/// `NAME::launch(offload::Launch, args…)` for an explicit device and launch shape.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into()).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Implement `offload::DeviceCopy` for a `#[repr(C)]` struct whose fields are all `DeviceCopy`.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(item: TokenStream) -> TokenStream {
    device_copy::expand(item.into()).unwrap_or_else(syn::Error::into_compile_error).into()
}
