//! Expansion of `#[offload::kernel]`.
//!
//! One function becomes three things, each behind its own `cfg`:
//! - the body, renamed, with `&mut [T]` parameters turned into `ThreadSlice<T>` (every target);
//! - on nvptx64, an `extern "ptx-kernel"` entry exported under the kernel's own name (a generic
//!   kernel: one per instance, `NAME__f32`), taking each slice or pointee as (pointer, length);
//! - on amdgcn, the same parameters, each by reference, in an `extern "C"` function exported as
//!   `__offload_amdgpu_NAME`: offload-build's AMD link step wraps it in the kernel `NAME`, which
//!   takes each parameter by value in the kernarg segment (see `amdgpu_entry`);
//! - on the host, the typed launcher `NAME(args…)` and module `NAME` (with `launch`, the kernel's
//!   descriptor, and the host-backend entry that runs one GPU thread). A generic kernel's
//!   launcher is generic too, bounded by a trait that only its declared instances implement, so
//!   launching an instance that was not compiled for the device does not compile.

use crate::instances::{self, Binding, Instance};
use crate::options::KernelOptions;
use crate::params::{self, Ownership, Param, Passing};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{parse_quote, Error, Generics, Ident, ItemFn, Result, ReturnType, WherePredicate};

const DEVICE_CFG: &str = "any(target_arch = \"nvptx64\", target_arch = \"amdgpu\")";

/// Where a kernel's host descriptor finds the device images.
#[derive(Clone, Copy)]
pub enum Images {
    /// `crate::__OFFLOAD_IMAGES`, defined once by `offload::embed_images!()`.
    CrateRoot,
    /// Its own copy in the kernel's module, for programs written for std::offload, which have no
    /// `embed_images!()` call.
    OwnCopy,
}

pub fn expand(attr: TokenStream, item: TokenStream, images: Images) -> Result<TokenStream> {
    let options: KernelOptions = syn::parse2(attr)?;
    let func: ItemFn = syn::parse2(item)?;
    check_signature(&func)?;
    let params = func
        .sig
        .inputs
        .iter()
        .map(params::parse)
        .collect::<Result<Vec<_>>>()?;
    let section = options.entry_section();
    let instances = instances::resolve(&func.sig.ident, &func.sig.generics, options.instances)?;

    let name = &func.sig.ident;
    let body_fn = format_ident!("__offload_body_{}", name);

    let body = expand_body(&func, &params, &body_fn, options.fast_math.is_some())?;
    let device_entries = if instances.is_empty() {
        let entry = format_ident!("__offload_entry_{}", name);
        device_entry(
            &params,
            &name.to_string(),
            &entry,
            &body_fn,
            quote! {},
            section.as_deref(),
        )
    } else {
        instances
            .iter()
            .map(|i| instance_entry(&func, &params, &body_fn, i, section.as_deref()))
            .collect()
    };
    let host = expand_host(&func, &params, &body_fn, &instances, images);
    let prelude = prelude_in_use();
    Ok(quote! {
        #body
        #device_entries
        #host
        #prelude
    })
}

/// Counts a `use offload::prelude::*;` of the kernel's module as used.
///
/// The expansion names what a kernel's signature needs by full path (`&mut [T]` becomes
/// `::offload::ThreadSlice`), so a module whose kernels only call methods, such as `iter_mine`,
/// uses nothing of the prelude by name and rustc warned that its import was unused. `Copy`
/// here, at the call site, resolves through the prelude's glob when the module has one (the
/// prelude re-exports `core::marker::Copy`; a glob import takes precedence over the language
/// prelude) and through the language prelude otherwise: the same trait either way. A module
/// without kernels still gets the warning for an unused prelude import.
fn prelude_in_use() -> TokenStream {
    quote! {
        const _: () = {
            fn __offload_prelude_in_use<T: Copy>() {}
        };
    }
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

/// The user's body with `&mut [T]` parameters seen as `ThreadSlice<T>` (or the view their
/// ownership attribute names); for a `fast_math` kernel, with `offload::math::fast` as `math`.
fn expand_body(
    func: &ItemFn,
    params: &[Param],
    body_fn: &Ident,
    fast_math: bool,
) -> Result<TokenStream> {
    let attrs = &func.attrs;
    let block = &func.block;
    let (generics, _, where_clause) = func.sig.generics.split_for_impl();
    let inputs = params.iter().map(|p| {
        let (name, ty, elem) = (&p.name, &p.ty, &p.elem);
        match p.passing {
            Passing::SliceMut => quote! { mut #name: ::offload::ThreadSlice<'_, #elem> },
            Passing::Reduce => {
                let (ptr, _) = raw_names(p);
                let (scratch, blocks) = scratch_names(p);
                quote! { #ptr: *mut #elem, #scratch: *mut u8, #blocks: usize }
            }
            _ if p.mutable_binding => quote! { mut #name: #ty },
            _ => quote! { #name: #ty },
        }
    });
    let tiles = params
        .iter()
        .filter_map(|p| {
            let (ownership, span) = p.ownership.as_ref()?;
            Some(crate::ownership::convert(p, ownership, *span, params))
        })
        .collect::<Result<Vec<_>>>()?;
    let body = if tiles.is_empty() {
        quote! { #block }
    } else {
        quote! {{ #(#tiles)* #block }}
    };
    // Shadows the module's `math` (the prelude's, or the user's `use offload::math`) for the
    // body's own calls; functions the body calls keep theirs.
    let body = if fast_math {
        quote! {{
            #[allow(unused_imports)]
            use ::offload::math::fast as math;
            #body
        }}
    } else {
        body
    };
    let body = with_reductions(params, body);
    Ok(quote! {
        #(#attrs)*
        #[doc(hidden)]
        #[inline(always)]
        #[allow(non_snake_case, unused_mut, clippy::too_many_arguments)]
        fn #body_fn #generics (#(#inputs),*) #where_clause #body
    })
}

/// The body of a kernel with `#[reduce]` parameters: the user's body as a closure over each
/// reduction's accumulator (its `return`s end the closure, not the thread), then every
/// accumulator combined over the launch into its target, by every thread.
fn with_reductions(params: &[Param], body: TokenStream) -> TokenStream {
    let reductions: Vec<&Param> = params
        .iter()
        .filter(|p| p.passing == Passing::Reduce)
        .collect();
    if reductions.is_empty() {
        return body;
    }
    let names: Vec<&Ident> = reductions.iter().map(|p| &p.name).collect();
    let elems: Vec<&syn::Type> = reductions.iter().map(|p| &p.elem).collect();
    let ops: Vec<&syn::Path> = reductions
        .iter()
        .map(|p| p.reduce_op.as_ref().expect("a reduction has its operation"))
        .collect();
    let accs: Vec<Ident> = names.iter().map(|n| format_ident!("{}__acc", n)).collect();
    let combines = reductions.iter().zip(&accs).map(|(p, acc)| {
        let (ptr, _) = raw_names(p);
        let (scratch, blocks) = scratch_names(p);
        let (elem, op) = (&p.elem, p.reduce_op.as_ref().unwrap());
        quote! {
            // SAFETY: the launcher passed this reduction's target and the launch's scratch for
            // it (see offload::reduce::combine_launch).
            unsafe { ::offload::reduce::combine_launch::<#elem, #op>(#acc, #scratch, #blocks, #ptr) };
        }
    });
    quote! {{
        #(let mut #accs: #elems = <#ops as ::offload::reduce::ReduceOp<#elems>>::identity();)*
        #[allow(clippy::redundant_closure_call)]
        (|#(#names: &mut #elems),*| #body)(#(&mut #accs),*);
        #(#combines)*
    }}
}

/// Raw names of a reduction's scratch: its address and the grid's block count.
fn scratch_names(p: &Param) -> (Ident, Ident) {
    (
        format_ident!("{}__scratch", p.name),
        format_ident!("{}__blocks", p.name),
    )
}

/// Raw names of an array view's extents, which follow its pointer and length.
fn extent_names(p: &Param, rank: usize) -> Vec<Ident> {
    (0..rank)
        .map(|axis| format_ident!("{}__extent{}", p.name, axis))
        .collect()
}

/// Raw parameter names for the device ABI: slices and pointees travel as (pointer, length).
fn raw_names(p: &Param) -> (Ident, Ident) {
    (
        format_ident!("{}__ptr", p.name),
        format_ident!("{}__len", p.name),
    )
}

/// The device entry points exported as `export` (nvptx64) and `__offload_amdgpu_{export}`
/// (amdgcn), calling the body with `generic_args`.
fn device_entry(
    params: &[Param],
    export: &str,
    entry: &Ident,
    body_fn: &Ident,
    generic_args: TokenStream,
    section: Option<&str>,
) -> TokenStream {
    let inputs = params.iter().map(|p| {
        let (ptr, len) = raw_names(p);
        let (pname, ty, elem) = (&p.name, &p.ty, &p.elem);
        match p.passing {
            Passing::Value => quote! { #pname: #ty },
            // A read-only slice arrives as a shared reference to zero elements: rustc marks such
            // a parameter `noalias readonly`, which lets LLVM load through it with the
            // non-coherent cache (`ld.global.nc`), as nvcc does for `const T* __restrict__`. The
            // runtime passes null (`None`) or an address aligned for `T`, and nothing writes
            // the memory during the launch.
            Passing::Slice => quote! { #ptr: Option<&[#elem; 0]>, #len: usize },
            Passing::Nd(rank) => {
                let extents = extent_names(p, rank);
                quote! { #ptr: Option<&[#elem; 0]>, #len: usize, #(#extents: usize),* }
            }
            Passing::NdMut(rank) => {
                let extents = extent_names(p, rank);
                quote! { #ptr: *mut #elem, #len: usize, #(#extents: usize),* }
            }
            Passing::Ref | Passing::PtrConst => {
                quote! { #ptr: *const #elem, #len: usize }
            }
            Passing::SliceMut | Passing::PtrMut | Passing::Atomic => {
                quote! { #ptr: *mut #elem, #len: usize }
            }
            Passing::Reduce => {
                let (scratch, blocks) = scratch_names(p);
                quote! { #ptr: *mut #elem, #len: usize, #scratch: *mut u8, #blocks: usize }
            }
        }
    });
    let args = body_args(params);
    // The body takes raw pointers, as in the host build (`None` is null: the same bits).
    let slice_pointers = params
        .iter()
        .filter(|p| matches!(p.passing, Passing::Slice | Passing::Nd(_)))
        .map(|p| {
            let (ptr, _) = raw_names(p);
            quote! { let #ptr = #ptr.map_or(::core::ptr::null(), |p| p.as_ptr()); }
        });
    // The device linker applies the options the section names (`KernelOptions::entry_section`)
    // and drops the section.
    let options_section = section.map(|s| quote! { #[link_section = #s] });
    let amdgpu = amdgpu_entry(
        params,
        export,
        entry,
        body_fn,
        &generic_args,
        &args,
        &options_section,
    );
    quote! {
        #[cfg(target_arch = "nvptx64")]
        #[doc(hidden)]
        #options_section
        #[export_name = #export]
        #[allow(non_snake_case, improper_ctypes_definitions, clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn #entry(#(#inputs),*) {
            // SAFETY: the runtime passes each slice as the device copy of a host slice of
            // exactly this length, each `&T` and raw pointer as the device copy of one `T`, and
            // one output buffer per `&mut [T]` parameter.
            #(#slice_pointers)*
            unsafe { #body_fn::<#generic_args>(#(#args),*) }
        }

        #amdgpu
    }
}

/// The amdgcn entry: the nvptx entry's parameters, each by reference.
///
/// rustc's amdgcn kernel ABI passes structs and arrays by pointer to memory the caller would
/// have to allocate, and splits two-field structs into two arguments, so kernarg offsets would
/// stop matching the C-struct parameter buffer the launcher packs. Taken by reference from a
/// plain function, every parameter arrives as a pointer with its size and alignment in the LLVM
/// IR (`dereferenceable(N) align A`); offload-build's AMD link step turns each into a `byref`
/// argument of the kernel it generates, which the backend lays out in the kernarg segment exactly
/// as a C struct (and the build checks that in the code object's metadata).
fn amdgpu_entry(
    params: &[Param],
    export: &str,
    entry: &Ident,
    body_fn: &Ident,
    generic_args: &TokenStream,
    args: &[TokenStream],
    options_section: &Option<TokenStream>,
) -> TokenStream {
    let export = format!("__offload_amdgpu_{export}");
    let entry = format_ident!("{}__amdgpu", entry);
    let mut inputs = Vec::new();
    let mut loads = Vec::new();
    for p in params {
        let (ptr, len) = raw_names(p);
        let (pname, ty, elem) = (&p.name, &p.ty, &p.elem);
        match p.passing {
            Passing::Value => {
                inputs.push(quote! { #pname: &#ty });
                loads.push(quote! { let #pname: #ty = *#pname; });
            }
            Passing::Slice | Passing::Ref | Passing::PtrConst => {
                inputs.push(quote! { #ptr: &*const #elem, #len: &usize });
                loads.push(quote! { let (#ptr, #len) = (*#ptr, *#len); });
            }
            Passing::SliceMut | Passing::PtrMut | Passing::Atomic => {
                inputs.push(quote! { #ptr: &*mut #elem, #len: &usize });
                loads.push(quote! { let (#ptr, #len) = (*#ptr, *#len); });
            }
            Passing::Reduce => {
                let (scratch, blocks) = scratch_names(p);
                inputs.push(
                    quote! { #ptr: &*mut #elem, #len: &usize, #scratch: &*mut u8, #blocks: &usize },
                );
                loads.push(quote! { let (#ptr, #len, #scratch, #blocks) = (*#ptr, *#len, *#scratch, *#blocks); });
            }
            Passing::Nd(rank) => {
                let extents = extent_names(p, rank);
                inputs.push(quote! { #ptr: &*const #elem, #len: &usize, #(#extents: &usize),* });
                loads.push(
                    quote! { let (#ptr, #len) = (*#ptr, *#len); #(let #extents = *#extents;)* },
                );
            }
            Passing::NdMut(rank) => {
                let extents = extent_names(p, rank);
                inputs.push(quote! { #ptr: &*mut #elem, #len: &usize, #(#extents: &usize),* });
                loads.push(
                    quote! { let (#ptr, #len) = (*#ptr, *#len); #(let #extents = *#extents;)* },
                );
            }
        }
    }
    quote! {
        #[cfg(target_arch = "amdgpu")]
        #[doc(hidden)]
        #options_section
        #[export_name = #export]
        #[allow(non_snake_case, unused_variables, clippy::too_many_arguments)]
        pub unsafe extern "C" fn #entry(#(#inputs),*) {
            #(#loads)*
            // SAFETY: as for the nvptx entry: the kernel wrapper passes the kernarg segment's
            // copy of each parameter, which the runtime filled as for nvptx.
            unsafe { #body_fn::<#generic_args>(#(#args),*) }
        }
    }
}

/// The body's arguments, made from the raw parameters (each slice or pointee a pointer and a
/// length, named by `raw_names`): the same on the device and in the host build.
fn body_args(params: &[Param]) -> Vec<TokenStream> {
    params
        .iter()
        .map(|p| {
            let (ptr, len) = raw_names(p);
            let pname = &p.name;
            match p.passing {
                Passing::Value => quote! { #pname },
                Passing::Atomic => quote! { ::offload::Atomic::slice_from_raw(#ptr, #len) },
                Passing::Slice => quote! { ::offload::__device::entry_slice(#ptr, #len) },
                Passing::SliceMut => quote! { ::offload::ThreadSlice::from_raw_parts(#ptr, #len) },
                Passing::Nd(rank) => {
                    let extents = extent_names(p, rank);
                    quote! {
                        ::offload::nd::ArrayView::from_shape(
                            ::offload::__device::entry_slice(#ptr, #len), [#(#extents),*])
                    }
                }
                Passing::NdMut(rank) => {
                    let extents = extent_names(p, rank);
                    quote! {
                        ::offload::nd::ArrayViewMut::from_shape(
                            ::offload::ThreadSlice::from_raw_parts(#ptr, #len), [#(#extents),*])
                    }
                }
                Passing::Ref => quote! { &*#ptr },
                Passing::PtrConst | Passing::PtrMut => quote! { #ptr },
                Passing::Reduce => {
                    let (scratch, blocks) = scratch_names(p);
                    quote! { #ptr, #scratch, #blocks }
                }
            }
        })
        .collect()
}

/// Statements of the host build that read the raw parameters from the launch's packed ones
/// (`args`), in the device entry's order: a value by its type, a slice or pointee as a host
/// address word and a length word.
fn host_reads(params: &[Param]) -> Vec<TokenStream> {
    let mut index = 0usize;
    params
        .iter()
        .map(|p| {
            let (ptr, len) = raw_names(p);
            let (pname, elem) = (&p.name, &p.elem);
            let at = index;
            if p.passing == Passing::Value {
                index += 1;
                return quote! { let #pname = args.read::<#elem>(#at); };
            }
            index += 2;
            let len_at = at + 1;
            let read_ptr = quote! { let #ptr = args.host_pointer::<#elem>(#at); };
            match p.passing {
                // A pointee is one element: its length word goes unread.
                Passing::Ref | Passing::PtrConst | Passing::PtrMut => read_ptr,
                // The target (one element), then the scratch's address and block count.
                Passing::Reduce => {
                    let (scratch, blocks) = scratch_names(p);
                    let (scratch_at, blocks_at) = (index, index + 1);
                    index += 2;
                    quote! {
                        #read_ptr
                        let #scratch = args.host_pointer::<u8>(#scratch_at);
                        let #blocks = args.read::<u64>(#blocks_at) as usize;
                    }
                }
                Passing::Nd(rank) | Passing::NdMut(rank) => {
                    let extents = extent_names(p, rank);
                    let words = index..index + rank;
                    index += rank;
                    quote! {
                        #read_ptr
                        let #len = args.read::<u64>(#len_at) as usize;
                        #(let #extents = args.read::<u64>(#words) as usize;)*
                    }
                }
                _ => quote! {
                    #read_ptr
                    let #len = args.read::<u64>(#len_at) as usize;
                },
            }
        })
        .collect()
}

/// A generic kernel's entry for one instance, in a module where each generic parameter is an
/// alias of the instance's argument, so the parameter types resolve as written.
fn instance_entry(
    func: &ItemFn,
    params: &[Param],
    body_fn: &Ident,
    inst: &Instance,
    section: Option<&str>,
) -> TokenStream {
    let name = &func.sig.ident;
    let module = format_ident!("__offload_instance_{}__{}", name, inst.suffix);
    let aliases = inst.bindings.iter().map(|b| match b {
        Binding::Type { param, ty } => quote! { type #param = #ty; },
        Binding::Const { param, ty, value } => quote! { const #param: #ty = #value; },
    });
    let params_in_order = inst.bindings.iter().map(|b| match b {
        Binding::Type { param, .. } | Binding::Const { param, .. } => param,
    });
    let entry = format_ident!("entry");
    let body_path = format_ident!("{}", body_fn);
    let export = format!("{}__{}", name, inst.suffix);
    let device = device_entry(
        params,
        &export,
        &entry,
        &body_path,
        quote! { #(#params_in_order),* },
        section,
    );
    let device_cfg: TokenStream = DEVICE_CFG.parse().unwrap();
    quote! {
        #[cfg(#device_cfg)]
        #[doc(hidden)]
        #[allow(non_snake_case, non_camel_case_types, non_upper_case_globals, dead_code)]
        mod #module {
            #[allow(unused_imports)]
            use super::*;
            #(#aliases)*
            #device
        }
    }
}

/// Doc and `# Safety` text for launchers that take raw pointers.
fn pointer_contract(params: &[Param]) -> Option<String> {
    let pointers: Vec<String> = params
        .iter()
        .filter(|p| p.passing.is_raw_pointer())
        .map(|p| format!("`{}`", p.name))
        .collect();
    (!pointers.is_empty()).then(|| {
        format!(
            "# Safety\nEach raw pointer ({}) must be aligned and valid for reads (`*mut`: and writes) of \
             `size_of` of its pointee, which nothing else may access during the launch. The \
             pointee is copied to the device (`*mut`: and back after the kernel succeeded), as \
             std::offload maps pointers; every GPU thread sees the same device copy. A null \
             pointer is an `Err(Error::InvalidArgument)`.",
            pointers.join(", ")
        )
    })
}

fn expand_host(
    func: &ItemFn,
    params: &[Param],
    body_fn: &Ident,
    instances: &[Instance],
    images: Images,
) -> TokenStream {
    let vis = &func.vis;
    let name = &func.sig.ident;
    let name_str = name.to_string();
    let generic = !instances.is_empty();
    // Raw pointers and scatter indices: what the caller vouches for.
    let contract = match (
        pointer_contract(params),
        crate::ownership::scatter_contract(params),
    ) {
        (Some(p), Some(s)) => Some(format!(
            "{p}\n\nAlso: {}",
            s.trim_start_matches("# Safety\n")
        )),
        (p, s) => p.or(s),
    };
    // An `unsafe fn` kernel: its own `# Safety` section is the launchers' contract too.
    let contract = match (func.sig.unsafety.is_some(), contract) {
        (true, other) => Some(format!(
            "# Safety\nThe kernel is `unsafe`: keep the contract of its own `# Safety` section.{}",
            other
                .map(|o| format!("\n\nAlso: {}", o.trim_start_matches("# Safety\n")))
                .unwrap_or_default()
        )),
        (false, other) => other,
    };
    let unsafety = contract.as_ref().map(|_| quote! { unsafe });
    let contract_doc: Vec<&String> = contract.iter().collect();
    // Queued launches read and write their pointees until the stream's scope ends.
    let enqueue_contract: Vec<String> = contract
        .iter()
        .map(|c| c.replace("during the launch", "until the stream's scope ends"))
        .collect();
    let doc_launcher = format!(
        "Launch kernel `{name_str}` on the default device (or where its device-resident arguments \
         live) with a grid sized from the data, copying slices to the device and `&mut` slices back \
         unless a data region mapped them; map kinds (`offload::from(&mut y)`, ...) override that. \
         See [`{name_str}::launch`] for an explicit device and shape."
    );
    let doc_module = format!("Launch control of kernel `{name_str}`.");
    let names: Vec<&Ident> = params.iter().map(|p| &p.name).collect();
    // Slices take anything their map-kind trait accepts: host data, `from(&mut y)`, a
    // `DeviceVec`, a region's handle (see `offload::map`).
    let sig_inputs: Vec<TokenStream> = params
        .iter()
        .map(|p| {
            let (n, ty, elem) = (&p.name, &p.ty, &p.elem);
            match p.passing {
                Passing::Slice => quote! { #n: impl ::offload::map::InArg<#elem> },
                Passing::SliceMut => quote! { #n: impl ::offload::map::OutArg<#elem> },
                Passing::Nd(rank) => quote! { #n: impl ::offload::nd::NdIn<#elem, #rank> },
                Passing::NdMut(rank) => quote! { #n: impl ::offload::nd::NdOut<#elem, #rank> },
                Passing::Atomic => quote! { #n: &mut [#elem] },
                Passing::Reduce => quote! { #n: impl ::offload::map::ReduceInto<#elem> },
                _ => quote! { #n: #ty },
            }
        })
        .collect();
    // The same, with everything borrowed for the stream's scope `'s`, except device data that
    // orders its own uses (`StreamArg`) on a stream of mode `mode`.
    let stream_inputs = |mode: TokenStream| -> Vec<TokenStream> {
        params.iter().map(|p| {
            let (n, ty, elem) = (&p.name, &p.ty, &p.elem);
            match p.passing {
                Passing::Value | Passing::PtrConst | Passing::PtrMut => quote! { #n: #ty },
                Passing::Slice => {
                    quote! { #n: impl ::offload::map::InArg<#elem> + ::offload::map::StreamArg<'s, #mode> }
                }
                Passing::SliceMut => {
                    quote! { #n: impl ::offload::map::OutArg<#elem> + ::offload::map::StreamArg<'s, #mode> }
                }
                Passing::Nd(rank) => quote! { #n: impl ::offload::nd::NdIn<#elem, #rank> + 's },
                Passing::NdMut(rank) => quote! { #n: impl ::offload::nd::NdOut<#elem, #rank> + 's },
                Passing::Atomic => quote! { #n: &'s mut [#elem] },
                Passing::Ref => quote! { #n: &'s #elem },
                Passing::Reduce => {
                    quote! { #n: impl ::offload::map::ReduceInto<#elem> + ::offload::map::ReduceOnDevice + ::offload::map::StreamArg<'s, #mode> }
                }
            }
        }).collect()
    };
    let enqueue_inputs = stream_inputs(quote! { OffloadStreamMode });
    // A prepared launch runs on a running stream only: a handle of a recording stream would
    // outlive the recording's body and could add launches to a later graph that outlives their
    // borrows.
    let prepared_inputs = stream_inputs(quote! { ::offload::Runs });
    let null_checks = params
        .iter()
        .filter(|p| p.passing.is_raw_pointer())
        .map(|p| {
            let (n, n_str) = (&p.name, p.name.to_string());
            quote! {
                if #n.is_null() {
                    return ::core::result::Result::Err(::offload::Error::InvalidArgument {
                        kernel: #name_str,
                        argument: #n_str,
                        reason: ::core::convert::Into::into("is a null pointer"),
                    });
                }
                if !#n.is_aligned() {
                    return ::core::result::Result::Err(::offload::Error::InvalidArgument {
                        kernel: #name_str,
                        argument: #n_str,
                        reason: ::core::convert::Into::into("is not aligned for its pointee type"),
                    });
                }
            }
        })
        .collect::<Vec<_>>();
    let kernel_args: Vec<TokenStream> = params.iter().map(|p| {
        let (n, elem) = (&p.name, &p.elem);
        match p.passing {
            Passing::Value => quote! { ::offload::__private::KernelArg::value(&#n) },
            Passing::Atomic => quote! { ::offload::__private::KernelArg::atomics(#n) },
            Passing::Slice => quote! { ::offload::map::InArg::<#elem>::into_kernel_arg(#n) },
            Passing::SliceMut => quote! { ::offload::map::OutArg::<#elem>::into_kernel_arg(#n) },
            Passing::Nd(rank) => quote! { ::offload::nd::NdIn::<#elem, #rank>::into_kernel_arg(#n) },
            Passing::NdMut(rank) => quote! { ::offload::nd::NdOut::<#elem, #rank>::into_kernel_arg(#n) },
            Passing::Ref => {
                quote! { ::offload::__private::KernelArg::slice(::core::slice::from_ref(#n)) }
            }
            // SAFETY (both): non-null and aligned (checked above); valid for this launch by the
            // launcher's contract.
            Passing::PtrConst => quote! {
                ::offload::__private::KernelArg::slice(unsafe { ::core::slice::from_raw_parts(#n, 1) })
            },
            Passing::PtrMut => quote! {
                ::offload::__private::KernelArg::slice_mut(unsafe { ::core::slice::from_raw_parts_mut(#n, 1) })
            },
            // The target, then the launch's scratch for it (sized by the runtime from the grid).
            Passing::Reduce => quote! {
                ::offload::map::ReduceInto::<#elem>::into_kernel_arg(#n),
                ::offload::__private::KernelArg::reduction_scratch::<#elem>()
            },
        }
    }).collect();
    let host_reads = host_reads(params);
    let host_args = body_args(params);
    // One call may run a whole range of threads when nothing but the outputs' elements is
    // shared between threads: atomics and raw output pointers are reached by every thread, so
    // each thread's own call must reach them.
    let may_run_as_one = !params.iter().any(|p| {
        matches!(
            p.passing,
            Passing::Atomic | Passing::PtrMut | Passing::Reduce
        )
    });
    let arity = params.len();
    let arity_msg = {
        // What a caller passes, as written (not the launcher's map-kind traits).
        let list: Vec<String> = params
            .iter()
            .map(|p| {
                let (n, ty, elem) = (&p.name, &p.ty, &p.elem);
                let written = match p.passing {
                    Passing::Atomic => quote! { #n: &mut [#elem] },
                    _ => quote! { #n: #ty },
                };
                instances::tidy(written).replace(" :", ":")
            })
            .collect();
        format!("`args` of offload! has the wrong length: kernel `{name_str}` takes {arity} argument{} ({})", if arity == 1 { "" } else { "s" }, list.join(", "))
    };
    let (images_expr, own_images) = match images {
        Images::CrateRoot => (quote! { crate::__OFFLOAD_IMAGES }, quote! {}),
        Images::OwnCopy => (
            quote! { IMAGES },
            quote! {
                /// The device images of this crate (a std::offload program has no
                /// `offload::embed_images!()`).
                static IMAGES: ::offload::ImageSet =
                    ::core::include!(::core::concat!(::core::env!("OUT_DIR"), "/offload_images.rs"));
            },
        ),
    };
    let host_cfg: TokenStream = format!("not({DEVICE_CFG})").parse().unwrap();

    // Generic kernels: the descriptor comes from the instance's `Declared` impl.
    let generics = &func.sig.generics;
    // A generic kernel's items carry its generics, bounded to the declared instances (`path`
    // names the module holding `Instance` and `Declared`, as seen from the item).
    let bounded = |path: TokenStream| -> Generics {
        let mut g = generics.clone();
        let (_, type_args, _) = generics.split_for_impl();
        let clause = g.make_where_clause();
        clause
            .predicates
            .push(parse_quote! { #path Instance #type_args: #path Declared });
        for p in params {
            let elem = &p.elem;
            let pred: WherePredicate = parse_quote! { #elem: ::offload::DeviceCopy };
            clause.predicates.push(pred);
        }
        g
    };
    let (inner, outer) = if generic {
        (bounded(quote! {}), bounded(quote! { #name:: }))
    } else {
        (Generics::default(), Generics::default())
    };
    let (impl_generics, type_args, where_clause) = inner.split_for_impl();
    let call_generics = type_args.as_turbofish();
    let (outer_generics, _, outer_where) = outer.split_for_impl();
    // `launch`'s generics with the stream's scope `'s` in front and its mode last (after the
    // kernel's own lifetimes, types and consts), for `enqueue`.
    let mut enqueue_generics = inner.clone();
    enqueue_generics.params.insert(0, parse_quote! { 's });
    enqueue_generics
        .params
        .push(parse_quote! { OffloadStreamMode: ::offload::StreamMode });
    let (enqueue_generics, _, _) = enqueue_generics.split_for_impl();
    // `launch`'s generics with the stream's scope `'s` in front, for a prepared launch.
    let mut prepared_generics = inner.clone();
    prepared_generics.params.insert(0, parse_quote! { 's });
    let (prepared_generics, prepared_args, _) = prepared_generics.split_for_impl();
    // The kernel's type parameters, which a prepared launch's handle carries unused.
    let kernel_types: Vec<&Ident> = generics.type_params().map(|t| &t.ident).collect();
    // In launch-argument order: a reduction is two arguments (its target and its scratch).
    let param_names: Vec<String> = params
        .iter()
        .flat_map(|p| {
            let copies = if p.passing == Passing::Reduce { 2 } else { 1 };
            std::iter::repeat_n(p.name.to_string(), copies)
        })
        .collect();
    // What each thread of a default launch covers: a `#[grid]` output's threads each walk a strip
    // of rows (of planes, taller, where every grid output is 3D); a `#[scatter]` output's stores
    // each wait for their index's load.
    let ownership_of = |wanted: fn(&Ownership) -> bool| {
        params
            .iter()
            .any(|p| p.ownership.as_ref().is_some_and(|(o, _)| wanted(o)))
    };
    let share = if params.iter().any(|p| p.passing == Passing::Reduce) {
        quote! { ::offload::__private::ThreadShare::Reduction }
    } else if ownership_of(|o| matches!(o, Ownership::Grid(e) if e.len() == 2)) {
        quote! { ::offload::__private::ThreadShare::Strip(::offload::STRIP_BYTES as u64) }
    } else if ownership_of(|o| matches!(o, Ownership::Grid(_))) {
        quote! { ::offload::__private::ThreadShare::Strip(::offload::STRIP_BYTES_3D as u64) }
    } else if ownership_of(|o| matches!(o, Ownership::Scatter(_))) {
        quote! { ::offload::__private::ThreadShare::OneElement }
    } else {
        quote! { ::offload::__private::ThreadShare::Batched }
    };
    let descriptor = if generic {
        generic_descriptor(func, &param_names, &share, instances, &images_expr)
    } else {
        quote! {
            /// The kernel's descriptor: its name, the device images holding it, its host entry
            /// and its parameters' names.
            pub static KERNEL: ::offload::__private::Kernel = ::offload::__private::Kernel {
                name: #name_str,
                images: &#images_expr,
                host_thread,
                host_threads,
                params: &[#(#param_names),*],
                share: #share,
            };
        }
    };
    let kernel_ref = if generic {
        quote! { <Instance #call_generics as Declared>::kernel() }
    } else {
        quote! { &KERNEL }
    };
    let launch_call =
        quote! { #name::launch #call_generics(::offload::Launch::auto(), #(#names),*) };
    let launch_call = match &unsafety {
        // SAFETY: the caller keeps this launcher's contract, which is `launch`'s.
        Some(_) => quote! { unsafe { #launch_call } },
        None => launch_call,
    };
    quote! {
        #[cfg(#host_cfg)]
        #[doc = #doc_launcher]
        #(#[doc = #contract_doc])*
        #[allow(clippy::too_many_arguments, clippy::multiple_bound_locations)]
        #vis #unsafety fn #name #outer_generics (#(#sig_inputs),*) -> ::offload::Result<()> #outer_where {
            #launch_call
        }

        #[cfg(#host_cfg)]
        #[doc = #doc_module]
        #[allow(non_snake_case)]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;

            /// Launch with an explicit device and launch shape.
            #(#[doc = #contract_doc])*
            #[allow(clippy::too_many_arguments, clippy::multiple_bound_locations)]
            pub #unsafety fn launch #impl_generics (launch: ::offload::Launch<'_>, #(#sig_inputs),*) -> ::offload::Result<()> #where_clause {
                #(#null_checks)*
                let mut args = [#(#kernel_args),*];
                ::offload::__private::launch(#kernel_ref, launch, &mut args)
            }

            /// Queue on `stream` and return at once; host data it is given stays borrowed until
            /// the stream's scope ends (see `offload::scope`), a `DeviceVec` for the call only
            /// (while the graph lives, on the handle that `record_graph` gives its body).
            #(#[doc = #enqueue_contract])*
            #[allow(clippy::too_many_arguments, clippy::multiple_bound_locations)]
            pub #unsafety fn enqueue #enqueue_generics (
                stream: &::offload::Stream<'s, OffloadStreamMode>,
                launch: ::offload::Launch<'_>,
                #(#enqueue_inputs),*
            ) -> ::offload::Result<()> #where_clause {
                #(#null_checks)*
                let args = [#(#kernel_args),*];
                ::offload::__private::enqueue(#kernel_ref, stream, launch, &args)
            }

            /// A launch on `stream` (running, not recording a graph) as `launch` says, prepared
            /// once for a loop of launches: the kernel's entry found and its shape checked now,
            /// so that each [`Prepared::enqueue`] only checks its arguments (their devices,
            /// device memory shared with a written argument, a default grid's element count)
            /// before queueing.
            /// `Err` for a shape the device or kernel refuses, a missing image, or a launch
            /// naming another device than the stream's.
            #[allow(clippy::multiple_bound_locations)]
            pub fn prepare #prepared_generics (
                stream: &::offload::Stream<'s>,
                launch: ::offload::Launch<'_>,
            ) -> ::offload::Result<Prepared #prepared_args> #where_clause {
                ::core::result::Result::Ok(Prepared {
                    launch: ::offload::__private::prepare(#kernel_ref, stream, launch)?,
                    _kernel: ::core::marker::PhantomData,
                })
            }

            /// Launches of this kernel on one stream with fixed settings, from [`prepare`].
            pub struct Prepared #prepared_generics #where_clause {
                launch: ::offload::__private::PreparedEnqueue<'s>,
                _kernel: ::core::marker::PhantomData<fn() -> (#(#kernel_types,)*)>,
            }

            impl #prepared_generics Prepared #prepared_args #where_clause {
                /// Queue on the stream and return at once, as this module's `enqueue` with the
                /// prepared settings: the same borrows, checks and errors, and `Err(Released)`
                /// once the device was released.
                #(#[doc = #enqueue_contract])*
                #[allow(clippy::too_many_arguments, clippy::multiple_bound_locations)]
                pub #unsafety fn enqueue(&mut self, #(#prepared_inputs),*) -> ::offload::Result<()> {
                    #(#null_checks)*
                    let args = [#(#kernel_args),*];
                    self.launch.enqueue(&args)
                }
            }

            /// Fails const evaluation (a compile error naming the parameters) unless `given`,
            /// the length of `offload!`'s `args`, is the kernel's parameter count.
            #[doc(hidden)]
            pub const fn __offload_check_arity(given: usize) {
                if given != #arity {
                    ::core::panic!(#arity_msg)
                }
            }

            #own_images
            #descriptor

            /// The kernel's host build: runs one GPU thread on the host.
            ///
            /// # Safety
            /// `args` must be the packed parameters of a launch of this kernel, built by `launch`
            /// from its arguments, and every thread of the launch runs through the host
            /// plugin's scheduler.
            #[allow(clippy::multiple_bound_locations, non_snake_case)]
            unsafe fn host_thread #impl_generics (args: &::offload::__private::PackedArgs) #where_clause {
                // SAFETY: the parameters are those `launch` packed from this kernel's arguments:
                // each value of its type, each slice or pointee as the host address and length
                // of data borrowed for the launch, as the device entry takes them.
                unsafe {
                    #(#host_reads)*
                    super::#body_fn #call_generics(#(#host_args),*)
                }
            }

            /// The kernel's host build for threads that never wait for one another: runs the
            /// launch's threads `range`, its parameters read once (see `run_threads`).
            ///
            /// # Safety
            /// As `host_thread`, and `range` lies within the launch's grid.
            #[allow(clippy::multiple_bound_locations, non_snake_case)]
            unsafe fn host_threads #impl_generics (
                args: &::offload::__private::PackedArgs,
                range: ::offload::__private::ThreadRange,
            ) #where_clause {
                // SAFETY: as in `host_thread`; every thread of `range` gets the same
                // parameters, as every GPU thread of the launch does.
                unsafe {
                    #(#host_reads)*
                    ::offload::__private::run_threads(range, #may_run_as_one, || {
                        super::#body_fn #call_generics(#(#host_args),*)
                    })
                }
            }
        }
    }
}

/// For a generic kernel: `Instance<…>` names a choice of generic arguments, and the sealed trait
/// `Declared`, implemented for the declared instances only, gives each its descriptor. Launching
/// any other instance fails to compile with the trait's message.
fn generic_descriptor(
    func: &ItemFn,
    param_names: &[String],
    share: &TokenStream,
    instances: &[Instance],
    images: &TokenStream,
) -> TokenStream {
    let name = &func.sig.ident;
    let name_str = name.to_string();
    let generics = &func.sig.generics;
    let struct_params = generics.params.iter().map(|p| match p {
        syn::GenericParam::Type(t) => {
            let id = &t.ident;
            quote! { #id }
        }
        syn::GenericParam::Const(c) => {
            let (id, ty) = (&c.ident, &c.ty);
            quote! { const #id: #ty }
        }
        syn::GenericParam::Lifetime(_) => unreachable!("rejected by instances::resolve"),
    });
    let type_params: Vec<&Ident> = generics.type_params().map(|t| &t.ident).collect();
    let declared_list = instances
        .iter()
        .map(|i| format!("{name_str}::<{}>", i.describe()))
        .collect::<Vec<_>>()
        .join(", ");
    let message =
        format!("this instance of generic kernel `{name_str}` was not compiled for the device");
    let label = format!("`{name_str}` has no device entry for these generic arguments");
    let note = format!(
        "the device images hold only {declared_list}; add the missing one to #[offload::kernel(instances(...))]"
    );
    let impls = instances.iter().map(|inst| {
        let args = inst.args();
        let entry = format!("{}__{}", name_str, inst.suffix);
        quote! {
            impl sealed::Sealed for Instance<#args> {}
            impl Declared for Instance<#args> {
                fn kernel() -> &'static ::offload::__private::Kernel {
                    static KERNEL: ::offload::__private::Kernel = ::offload::__private::Kernel {
                        name: #entry,
                        images: &#images,
                        host_thread: host_thread::<#args>,
                        host_threads: host_threads::<#args>,
                        params: &[#(#param_names),*],
                        share: #share,
                    };
                    &KERNEL
                }
            }
        }
    });
    quote! {
        /// One choice of the kernel's generic arguments.
        pub struct Instance<#(#struct_params),*>(::core::marker::PhantomData<fn() -> (#(#type_params,)*)>);

        mod sealed {
            pub trait Sealed {}
        }

        /// Implemented for the instances compiled for the device, and only those.
        #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
        pub trait Declared: sealed::Sealed {
            /// The instance's descriptor: its device entry, the images, its host entry.
            fn kernel() -> &'static ::offload::__private::Kernel;
        }

        #(#impls)*
    }
}
