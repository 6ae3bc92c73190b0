//! Expansion of `offload!`, the launch syntax of rustc nightly's `core::offload::offload!`, so a
//! program written for it switches by changing the import.
//!
//! `offload! { kernel = path, workgroup_dim = [x, y, z], thread_dim = [x, y, z], dyn_cache = 0,
//! device = index, args = (a, &x, &mut y) }` becomes a call of the kernel's typed launcher
//! `path::launch(Launch…, a, &x, &mut y)`, so argument types are checked against the kernel's.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Error, Expr, Ident, PathArguments, Result, Token};

const FIELDS: &str = "kernel, args, workgroup_dim, thread_dim, dyn_cache, device";

struct Field {
    name: Ident,
    value: Expr,
}

impl Parse for Field {
    fn parse(input: ParseStream) -> Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        Ok(Field {
            name,
            value: input.parse()?,
        })
    }
}

#[derive(Default)]
struct Fields {
    kernel: Option<Expr>,
    args: Option<Expr>,
    workgroup_dim: Option<Expr>,
    thread_dim: Option<Expr>,
    dyn_cache: Option<Expr>,
    device: Option<Expr>,
}

/// What the expansion evaluates to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// `offload::Result<()>`, the launcher's own result.
    Result,
    /// `()`, as std::offload's macro: a failed launch panics, and raw-pointer arguments need no
    /// `unsafe` block at the call.
    Std,
}

pub fn expand(input: TokenStream) -> Result<TokenStream> {
    expand_flavor(input, Flavor::Result)
}

pub fn expand_std(input: TokenStream) -> Result<TokenStream> {
    expand_flavor(input, Flavor::Std)
}

fn expand_flavor(input: TokenStream, flavor: Flavor) -> Result<TokenStream> {
    let parsed =
        syn::parse::Parser::parse2(Punctuated::<Field, Token![,]>::parse_terminated, input)?;
    let mut f = Fields::default();
    for Field { name, value } in parsed {
        let slot = match name.to_string().as_str() {
            "kernel" => &mut f.kernel,
            "args" => &mut f.args,
            "workgroup_dim" => &mut f.workgroup_dim,
            "thread_dim" => &mut f.thread_dim,
            "dyn_cache" => &mut f.dyn_cache,
            "device" => &mut f.device,
            other => {
                return Err(Error::new(
                    name.span(),
                    format!("unknown field `{other}`; expected one of {FIELDS}"),
                ))
            }
        };
        if slot.is_some() {
            return Err(Error::new(name.span(), format!("duplicate field `{name}`")));
        }
        *slot = Some(value);
    }
    let missing = |what: &str| Error::new(Span::call_site(), format!("missing field `{what}`"));
    let kernel = f.kernel.ok_or_else(|| missing("kernel"))?;
    let args = f.args.ok_or_else(|| missing("args"))?;

    let mut kernel = match kernel {
        Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => p.path,
        other => {
            return Err(Error::new_spanned(
                other,
                "`kernel` must name an #[offload::kernel] function",
            ))
        }
    };
    // `kernel = fill::<f64>` picks an instance of a generic kernel: the arguments go to its
    // launcher, `fill::launch::<f64>`.
    let instance = match kernel.segments.last_mut().map(|s| &mut s.arguments) {
        Some(PathArguments::AngleBracketed(a)) => {
            let mut a = a.clone();
            a.colon2_token = Some(Default::default());
            kernel.segments.last_mut().unwrap().arguments = PathArguments::None;
            quote! { #a }
        }
        _ => quote! {},
    };
    // rustc's arity errors point at the call; spanning it at the tuple points them there.
    let args_span = args.span();
    let args: Vec<Expr> = match args {
        Expr::Tuple(t) => t.elems.into_iter().collect(),
        // `(x)` is a parenthesized value, not a tuple; taking it as one argument is what was meant.
        Expr::Paren(p) => vec![*p.expr],
        other => {
            return Err(Error::new_spanned(
                other,
                "`args` must be a tuple, e.g. args = (a, &x, &mut y)",
            ))
        }
    };
    // Bytes of dynamic shared memory per block (a u32), as `Launch::dynamic_shared`.
    let dyn_cache = f.dyn_cache.map_or(quote! { 0u32 }, |d| quote! { #d });
    // std::offload's defaults: one workgroup of one thread.
    let grid = dim("workgroup_dim", f.workgroup_dim)?;
    let block = dim("thread_dim", f.thread_dim)?;

    let launcher = quote_spanned! {kernel.span()=> #kernel::launch #instance };
    let launch = match &f.device {
        None => quote! { ::offload::Launch::auto() },
        Some(_) => quote! { ::offload::Launch::on(&__offload_device) },
    };
    // rustc alone reports a wrong count as "takes 4 arguments" (counting the Launch) with a
    // garbled suggestion; this check names the kernel's parameters instead.
    let given = args.len();
    let check = quote_spanned! {args_span=> const _: () = #kernel::__offload_check_arity(#given); };
    let call = match flavor {
        Flavor::Result => quote_spanned! {args_span=>
            { #check #launcher(#launch.grid(#grid).block(#block).dynamic_shared(#dyn_cache), #(#args),*) }
        },
        Flavor::Std => {
            // The arguments are evaluated outside the `unsafe` block, so that it covers the
            // launcher call alone.
            let temps: Vec<Ident> = (0..given)
                .map(|i| format_ident!("__offload_arg{i}"))
                .collect();
            quote_spanned! {args_span=> {
                #check
                let (#(#temps,)*) = (#(#args,)*);
                #[allow(unused_unsafe)]
                // SAFETY: std::offload's contract, which programs written for it keep: each raw
                // pointer argument points to a live, aligned value that nothing else touches
                // during the launch.
                let __offload_result = unsafe { #launcher(#launch.grid(#grid).block(#block).dynamic_shared(#dyn_cache), #(#temps),*) };
                __offload_result
            } }
        }
    };
    let result = match f.device {
        None => call,
        // A plain block, not a closure, so the arguments' borrows are not moved anywhere.
        Some(index) => quote! {
            match ::offload::Device::by_index(#index) {
                ::core::result::Result::Ok(__offload_device) => #call,
                ::core::result::Result::Err(e) => ::core::result::Result::Err(e),
            }
        },
    };
    Ok(match flavor {
        Flavor::Result => result,
        Flavor::Std => quote! {{
            let __offload_status: ::offload::Result<()> = #result;
            if let ::core::result::Result::Err(e) = __offload_status {
                ::core::panic!("offload: {}", e)
            }
        }},
    })
}

/// A `[x, y, z]` launch dimension as a `[u32; 3]` expression; absent is `[1, 1, 1]`.
fn dim(field: &str, value: Option<Expr>) -> Result<TokenStream> {
    let value = match value {
        None => return Ok(quote! { [1u32, 1u32, 1u32] }),
        Some(v) => v,
    };
    let wrong = |v: &Expr| {
        Error::new_spanned(
            v,
            format!("`{field}` must be a 3-element array, e.g. {field} = [256, 1, 1]"),
        )
    };
    match &value {
        Expr::Array(a) if a.elems.len() == 3 => {}
        Expr::Array(_) | Expr::Lit(_) | Expr::Tuple(_) => return Err(wrong(&value)),
        // `[n; 3]`, a variable or a call: rustc checks that it is a `[u32; 3]`.
        _ => {}
    }
    let span = value.span();
    Ok(quote_spanned! {span=> { let __offload_dim: [u32; 3] = #value; __offload_dim } })
}
