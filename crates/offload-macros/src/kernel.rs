//! Expansion of `#[offload::kernel]`.
//!
//! One function becomes three things, each behind its own `cfg`:
//! - the body, renamed, with `&mut [T]` parameters turned into `ThreadSlice<T>` (every target);
//! - on nvptx64, an `extern "ptx-kernel"` entry exported under the kernel's own name, taking
//!   each slice as (pointer, length);
//! - on the host, the typed launcher `NAME(args…)` and module `NAME` (with `launch`, the kernel's
//!   descriptor, and the host-backend entry that runs one GPU thread).

use crate::params::{self, Param, Passing};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Error, Ident, ItemFn, Result, ReturnType};

const DEVICE_CFG: &str = "any(target_arch = \"nvptx64\", target_arch = \"amdgpu\")";

pub fn expand(attr: TokenStream, item: TokenStream) -> Result<TokenStream> {
    if !attr.is_empty() {
        return Err(Error::new_spanned(
            attr,
            "#[offload::kernel] takes no arguments",
        ));
    }
    let func: ItemFn = syn::parse2(item)?;
    check_signature(&func)?;
    let params = func
        .sig
        .inputs
        .iter()
        .map(params::parse)
        .collect::<Result<Vec<_>>>()?;

    let name = &func.sig.ident;
    let body_fn = format_ident!("__offload_body_{}", name);

    let body = expand_body(&func, &params, &body_fn);
    let device_entry = expand_device_entry(&func, &params, &body_fn);
    let host = expand_host(&func, &params, &body_fn);
    Ok(quote! {
        #body
        #[cfg(target_arch = "nvptx64")]
        #device_entry
        #host
    })
}

fn check_signature(func: &ItemFn) -> Result<()> {
    let sig = &func.sig;
    if let ReturnType::Type(_, ty) = &sig.output {
        let unit = matches!(&**ty, syn::Type::Tuple(t) if t.elems.is_empty());
        if !unit {
            return Err(Error::new_spanned(
                ty,
                "an offload kernel returns nothing: write its results into a `&mut [T]` parameter",
            ));
        }
    }
    if !sig.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &sig.generics,
            "generic offload kernels are not supported yet",
        ));
    }
    if let Some(t) = &sig.asyncness {
        return Err(Error::new_spanned(t, "an offload kernel cannot be `async`"));
    }
    if let Some(abi) = &sig.abi {
        return Err(Error::new_spanned(
            abi,
            "an offload kernel is a plain Rust fn: the attribute chooses its ABI",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(Error::new_spanned(
            v,
            "an offload kernel cannot be variadic",
        ));
    }
    Ok(())
}

/// The user's body with `&mut [T]` parameters seen as `ThreadSlice<T>`.
fn expand_body(func: &ItemFn, params: &[Param], body_fn: &Ident) -> TokenStream {
    let attrs = &func.attrs;
    let block = &func.block;
    let inputs = params.iter().map(|p| {
        let (name, ty, elem) = (&p.name, &p.ty, &p.elem);
        match p.passing {
            Passing::SliceMut => quote! { mut #name: ::offload::ThreadSlice<'_, #elem> },
            _ if p.mutable_binding => quote! { mut #name: #ty },
            _ => quote! { #name: #ty },
        }
    });
    quote! {
        #(#attrs)*
        #[doc(hidden)]
        #[inline(always)]
        #[allow(non_snake_case, unused_mut, clippy::too_many_arguments)]
        fn #body_fn(#(#inputs),*) #block
    }
}

/// Raw parameter names for the device ABI: slices travel as (pointer, length).
fn raw_names(p: &Param) -> (Ident, Ident) {
    (
        format_ident!("{}__ptr", p.name),
        format_ident!("{}__len", p.name),
    )
}

fn expand_device_entry(func: &ItemFn, params: &[Param], body_fn: &Ident) -> TokenStream {
    let name = &func.sig.ident;
    let entry = format_ident!("__offload_entry_{}", name);
    let export = name.to_string();
    let mut inputs = Vec::new();
    let mut args = Vec::new();
    for p in params {
        let (ptr, len) = raw_names(p);
        let (pname, ty, elem) = (&p.name, &p.ty, &p.elem);
        match p.passing {
            Passing::Value => {
                inputs.push(quote! { #pname: #ty });
                args.push(quote! { #pname });
            }
            Passing::Slice => {
                inputs.push(quote! { #ptr: *const #elem, #len: usize });
                args.push(quote! { ::offload::__device::slice_from_raw(#ptr, #len) });
            }
            Passing::SliceMut => {
                inputs.push(quote! { #ptr: *mut #elem, #len: usize });
                args.push(quote! { ::offload::ThreadSlice::from_raw_parts(#ptr, #len) });
            }
            Passing::Atomic => {
                inputs.push(quote! { #ptr: *mut #elem, #len: usize });
                args.push(quote! { ::offload::Atomic::slice_from_raw(#ptr, #len) });
            }
        }
    }
    quote! {
        #[doc(hidden)]
        #[export_name = #export]
        #[allow(non_snake_case, improper_ctypes_definitions, clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn #entry(#(#inputs),*) {
            // SAFETY: the runtime passes each slice as the device copy of a host slice of
            // exactly this length, and one output buffer per `&mut [T]` parameter.
            unsafe { #body_fn(#(#args),*) }
        }
    }
}

fn expand_host(func: &ItemFn, params: &[Param], body_fn: &Ident) -> TokenStream {
    let vis = &func.vis;
    let name = &func.sig.ident;
    let name_str = name.to_string();
    let doc_launcher = format!(
        "Launch kernel `{name_str}` on the default device with a grid sized from the data, copying \
         slices to the device and `&mut` slices back. See [`{name_str}::launch`] for an explicit device and shape."
    );
    let doc_module = format!("Launch control of kernel `{name_str}`.");
    let names: Vec<&Ident> = params.iter().map(|p| &p.name).collect();
    let sig_inputs: Vec<TokenStream> = params
        .iter()
        .map(|p| {
            let (n, ty, elem) = (&p.name, &p.ty, &p.elem);
            match p.passing {
                Passing::Atomic => quote! { #n: &mut [#elem] },
                _ => quote! { #n: #ty },
            }
        })
        .collect();
    // The same, with every slice borrowed for the stream's scope `'s`.
    let enqueue_inputs = params.iter().map(|p| {
        let (n, ty, elem) = (&p.name, &p.ty, &p.elem);
        match p.passing {
            Passing::Value => quote! { #n: #ty },
            Passing::Slice => quote! { #n: &'s [#elem] },
            Passing::SliceMut | Passing::Atomic => quote! { #n: &'s mut [#elem] },
        }
    });
    let kernel_args: Vec<TokenStream> = params
        .iter()
        .map(|p| {
            let n = &p.name;
            match p.passing {
                Passing::Value => quote! { ::offload::__private::KernelArg::value(&#n) },
                Passing::Slice => quote! { ::offload::__private::KernelArg::slice(#n) },
                Passing::SliceMut => quote! { ::offload::__private::KernelArg::slice_mut(#n) },
                Passing::Atomic => quote! { ::offload::__private::KernelArg::atomics(#n) },
            }
        })
        .collect();
    let host_args = params.iter().enumerate().map(|(i, p)| {
        let elem = &p.elem;
        match p.passing {
            Passing::Value => quote! { args[#i].read_value::<#elem>() },
            Passing::Slice => quote! { args[#i].as_slice::<#elem>() },
            Passing::SliceMut => quote! { args[#i].as_thread_slice::<#elem>() },
            Passing::Atomic => quote! { args[#i].as_atomics::<#elem>() },
        }
    });
    let arity = params.len();
    let arity_msg = {
        let list: Vec<String> = sig_inputs
            .iter()
            .map(|input| input.to_string().replace(" :", ":").replace("& ", "&"))
            .collect();
        format!("`args` of offload! has the wrong length: kernel `{name_str}` takes {arity} argument{} ({})", if arity == 1 { "" } else { "s" }, list.join(", "))
    };
    let images = quote! { crate::__OFFLOAD_IMAGES };
    let host_cfg: TokenStream = format!("not({DEVICE_CFG})").parse().unwrap();
    quote! {
        #[cfg(#host_cfg)]
        #[doc = #doc_launcher]
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#(#sig_inputs),*) -> ::offload::Result<()> {
            #name::launch(::offload::Launch::auto(), #(#names),*)
        }

        #[cfg(#host_cfg)]
        #[doc = #doc_module]
        #[allow(non_snake_case)]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;

            /// Launch with an explicit device and launch shape.
            #[allow(clippy::too_many_arguments)]
            pub fn launch(launch: ::offload::Launch<'_>, #(#sig_inputs),*) -> ::offload::Result<()> {
                let mut args = [#(#kernel_args),*];
                ::offload::__private::launch(&KERNEL, launch, &mut args)
            }

            /// Queue on `stream` and return at once; the slices stay borrowed until the stream's
            /// scope ends (see `offload::scope`).
            #[allow(clippy::too_many_arguments)]
            pub fn enqueue<'s>(
                stream: &::offload::Stream<'s>,
                launch: ::offload::Launch<'_>,
                #(#enqueue_inputs),*
            ) -> ::offload::Result<()> {
                let mut args = [#(#kernel_args),*];
                ::offload::__private::enqueue(&KERNEL, stream, launch, &mut args)
            }

            /// Fails const evaluation (a compile error naming the parameters) unless `given`,
            /// the length of `offload!`'s `args`, is the kernel's parameter count.
            #[doc(hidden)]
            pub const fn __offload_check_arity(given: usize) {
                if given != #arity {
                    ::core::panic!(#arity_msg)
                }
            }

            /// The kernel's descriptor: its name, the device images holding it, and its host entry.
            pub static KERNEL: ::offload::__private::Kernel = ::offload::__private::Kernel {
                name: #name_str,
                images: &#images,
                host_thread,
            };

            /// Run one GPU thread of the kernel on the host.
            ///
            /// # Safety
            /// `args` must be the arguments of a launch of this kernel, built by `launch`.
            unsafe fn host_thread(args: &[::offload::__private::KernelArg<'_>]) {
                // SAFETY: the argument kinds and element types match `launch`'s, which built them.
                unsafe { super::#body_fn(#(#host_args),*) }
            }
        }
    }
}
