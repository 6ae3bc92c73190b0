//! Proc macros of `offload`. `#[kernel]` turns one ordinary Rust function into a device entry
//! point (nvptx64), a host-backend entry, and a typed launcher; `#[derive(DeviceCopy)]` vouches
//! that a `#[repr(C)]` struct can be copied to the device.

mod device_copy;
mod kernel;
mod offload_macro;
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
    kernel::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Launch a kernel with the syntax of rustc nightly's `core::offload::offload!`:
///
/// ```ignore
/// offload::offload! {
///     kernel = kernels::saxpy,      // an #[offload::kernel] function
///     workgroup_dim = [4096, 1, 1], // blocks in the grid (default [1, 1, 1])
///     thread_dim = [256, 1, 1],     // threads per block (default [1, 1, 1])
///     dyn_cache = 0,                // dynamic shared memory: only 0 is supported
///     device = 0,                   // index into offload::devices() (default: the default device)
///     args = (2.0f32, &x, &mut y),  // the kernel's arguments, as a tuple
/// }
/// ```
/// Fields may come in any order; `kernel` and `args` are required. Evaluates to
/// `offload::Result<()>`, like `KERNEL::launch`, which it calls.
#[proc_macro]
pub fn offload(input: TokenStream) -> TokenStream {
    offload_macro::expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implement `offload::DeviceCopy` for a `#[repr(C)]` struct whose fields are all `DeviceCopy`.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(item: TokenStream) -> TokenStream {
    device_copy::expand(item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
