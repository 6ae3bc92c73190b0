//! Proc macros of `offload`. `#[kernel]` turns one ordinary Rust function into a device entry
//! point (nvptx64), a host-backend entry, and a typed launcher; `#[derive(DeviceCopy)]` vouches
//! that a `#[repr(C)]` struct can be copied to the device.

mod device_copy;
mod instances;
mod kernel;
mod offload_macro;
mod options;
mod ownership;
mod params;

use proc_macro::TokenStream;

/// Make a function an offload kernel.
///
/// Parameters may be scalars and `#[repr(C)]` structs implementing `DeviceCopy` (by value),
/// `&[T]` (copied to the device, read-only) and `&mut [T]` (copied to the device and back; seen
/// in the body as an `offload::ThreadSlice<T>`, which lets each thread reach only its own
/// elements). The function must return nothing.
///
/// `&T` (a single value, copied to the device), `*const T` and `*mut T` (copied there and, for
/// `*mut`, back: std::offload's mapping of pointers by the size of their pointee) are accepted
/// too; raw pointers make the launcher `unsafe`.
///
/// A generic kernel lists the instances compiled for the device:
/// `#[offload::kernel(instances(T = f32 | f64 | half::f16, N = 2 | 4))]` builds every
/// combination, each exported as `NAME__f32__2` and so on. Its launcher is generic, and launching
/// an instance that is not listed is a compile error. A kernel whose one type parameter has only
/// marker bounds (`T: Copy`) needs no list: every primitive `DeviceCopy` type is built.
///
/// `#[offload::kernel(fma)]` lets the device fuse the kernel's float multiplies and adds into
/// FMAs, as nvcc does by default: faster, and one rounding instead of two, so the results may
/// differ in the last bits from the host backend's (which keeps Rust's separate roundings).
/// `offload_build::Kernels::fma_contraction(true)` does the same for a whole kernels module.
///
/// `#[offload::kernel(fast_math)]` is nvcc's `-use_fast_math` for one kernel: in its body `math`
/// is `offload::math::fast` (the GPU's approximate `f32` `sin`, `cos`, `exp`, `ln`, `sqrt`,
/// `rsqrt`, `div`, within the error bounds that module documents), and on the device its `f32`
/// divisions and square roots are approximate, subnormal `f32` values flush to zero and
/// multiplies and adds fuse into FMAs. `f64`, SPIR-V images and the host backend stay exact.
/// `offload_build::Kernels::fast_math(true)` does it for a whole kernels module.
///
/// `#[offload::kernel(max_registers = N)]` (1 to 255) caps the registers of each thread of the
/// kernel, as CUDA's `__launch_bounds__`/`-maxrregcount`: offload-build writes `.maxnreg N` into
/// the kernel's PTX entries (every instance), which ptxas and the driver's JIT obey, spilling to
/// local memory if they must. A cap can trade a kernel's loads in flight for more resident warps.
/// In the AMD images N caps the vector registers (VGPRs) of each lane, through LLVM's
/// `"amdgpu-num-vgpr"` (offload-build's `amdgpu_register_cap` says how, per architecture). The
/// SPIR-V images and the host backend ignore it.
///
/// Generated next to the function, on the host: `fn NAME(args…) -> offload::Result<()>`, which
/// launches with a grid sized from the data on the default device, and a module `NAME` with
/// `NAME::launch(offload::Launch, args…)` for an explicit device and launch shape.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into(), kernel::Images::CrateRoot)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Launch a kernel with the syntax of rustc nightly's `core::offload::offload!`: the fields
/// `kernel` (an `#[offload::kernel]` fn), `workgroup_dim` (blocks in the grid, default
/// `[1, 1, 1]`), `thread_dim` (threads per block, default `[1, 1, 1]`), `dyn_cache` (bytes of
/// dynamic shared memory per block, a `u32`, default 0), `device` (an index into
/// `offload::devices()`, default: the default device) and `args` (the kernel's arguments, a
/// tuple). The `offload` crate's docs ("Coming from std::offload") hold an example that runs as a
/// doctest. Fields may come in any order; `kernel` and `args` are required. Evaluates to
/// `offload::Result<()>`, like `KERNEL::launch`, which it calls.
#[proc_macro]
pub fn offload(input: TokenStream) -> TokenStream {
    offload_macro::expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// `#[offload_kernel]` of std::offload programs: `#[kernel]`, except that the kernel embeds the
/// crate's device images itself (those programs call no `offload::embed_images!()`).
#[proc_macro_attribute]
pub fn offload_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into(), kernel::Images::OwnCopy)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// `offload!` with std::offload's semantics: evaluates to `()`, panics when the launch fails, and
/// accepts raw-pointer arguments without an `unsafe` block, as std::offload does.
#[proc_macro]
pub fn offload_std(input: TokenStream) -> TokenStream {
    offload_macro::expand_std(input.into())
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
