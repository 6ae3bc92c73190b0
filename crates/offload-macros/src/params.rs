//! How each kernel parameter crosses to the device, decided from its written type, as rustc's
//! `std::offload` maps by type: values by value, shared data to the device, mutable data there
//! and back.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{
    Attribute, Error, Expr, FnArg, GenericArgument, Ident, Pat, PathArguments, Result, Type,
};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Passing {
    /// Scalar or `DeviceCopy` struct, by value.
    Value,
    /// `&[T]`: copied to the device, read-only in the kernel.
    Slice,
    /// `&mut [T]`: copied to the device and back; a `ThreadSlice<T>` in the kernel.
    SliceMut,
    /// `&[Atomic<T>]`: the caller passes `&mut [T]`, copied to the device and back; every thread
    /// reaches every element, atomically.
    Atomic,
    /// `&T` (not a slice): the pointee copied to the device, a shared reference in the kernel.
    Ref,
    /// `*const T`: `size_of::<T>()` bytes copied to the device; the kernel gets the device address.
    PtrConst,
    /// `*mut T`: `size_of::<T>()` bytes copied to the device and back; the kernel gets the device
    /// address and all its threads share it (the kernel keeps them apart, in `unsafe` code).
    PtrMut,
    /// `ArrayViewN<T>` (N = 1, 2, 3, `offload::nd`): read-only elements like `&[T]`, followed by
    /// the N extents; the launcher takes an `NdIn` (ndarray's view of N dimensions).
    Nd(usize),
    /// `ArrayViewMutN<T>`: an output like `&mut [T]`, with its N extents; the launcher takes an
    /// `NdOut`.
    NdMut(usize),
    /// `#[reduce(op)] x: &mut T`: the thread's own accumulator in the body, combined over the
    /// launch and folded into the caller's value (`offload_kernel::reduce`). The device gets the
    /// target (pointer, length) and the launch's scratch (pointer, block count).
    Reduce,
}

impl Passing {
    /// Raw pointers make the launcher `unsafe`: the caller vouches for the pointee.
    pub fn is_raw_pointer(&self) -> bool {
        matches!(self, Passing::PtrConst | Passing::PtrMut)
    }
}

pub struct Param {
    pub name: Ident,
    pub mutable_binding: bool,
    /// The type as written, used in the launcher's signature.
    pub ty: Type,
    /// `T` of `&[T]`, `&mut [T]`, `&[Atomic<T>]`, `&T`, `*const T` or `*mut T`, or the value's own
    /// type.
    pub elem: Type,
    pub passing: Passing,
    /// `#[tile(len)]` or `#[scatter(index)]`, and where the attribute is (see `ownership`).
    pub ownership: Option<(Ownership, Span)>,
    /// For `Passing::Reduce`: the operation's type (`offload::reduce::Sum`, ...).
    pub reduce_op: Option<syn::Path>,
}

pub fn parse(arg: &FnArg) -> Result<Param> {
    let typed = match arg {
        FnArg::Typed(t) => t,
        FnArg::Receiver(r) => {
            return Err(Error::new_spanned(
                r,
                "an offload kernel cannot take `self`",
            ))
        }
    };
    let (name, mutable_binding) = match &*typed.pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
            (p.ident.clone(), p.mutability.is_some())
        }
        other => {
            return Err(Error::new_spanned(
                other,
                "offload kernel parameters must be plain names",
            ))
        }
    };
    let ty = (*typed.ty).clone();
    let reduce_op = parse_reduce(&typed.attrs)?;
    if let Some((op, span)) = reduce_op {
        return match &ty {
            Type::Reference(r) if r.mutability.is_some() && !matches!(&*r.elem, Type::Slice(_)) => {
                if parse_ownership(&typed.attrs)?.is_some() {
                    return Err(Error::new(
                        span,
                        "a #[reduce] parameter takes no ownership attribute",
                    ));
                }
                Ok(Param {
                    name,
                    mutable_binding,
                    ty: ty.clone(),
                    elem: (*r.elem).clone(),
                    passing: Passing::Reduce,
                    ownership: None,
                    reduce_op: Some(op),
                })
            }
            _ => Err(Error::new(
                span,
                "#[reduce(..)] takes a `&mut T` parameter: the thread's accumulator, as in \
                 `#[reduce(sum)] total: &mut f64`",
            )),
        };
    }
    let (elem, passing) = match &ty {
        Type::Reference(r) => match (&*r.elem, r.mutability.is_some()) {
            (Type::Slice(s), mutable) => {
                let elem = (*s.elem).clone();
                match (atomic_elem(&elem), mutable) {
                    (Some(inner), false) => (inner, Passing::Atomic),
                    (Some(_), true) => {
                        return Err(Error::new_spanned(
                            r,
                            "atomics are shared by every thread: take them as `&[Atomic<T>]`",
                        ))
                    }
                    (None, true) => (elem, Passing::SliceMut),
                    (None, false) => (elem, Passing::Slice),
                }
            }
            (other, false) => (other.clone(), Passing::Ref),
            (other, true) => return Err(Error::new_spanned(
                other,
                "a `&mut T` kernel parameter would be one mutable reference shared by every GPU \
                     thread: use `&mut [T]` (each thread reaches its own elements), \
                     `#[reduce(sum)]` (or product, min, max) for a reduction into it, or `*mut T` \
                     (raw, unsafe to write)",
            )),
        },
        Type::Ptr(p) => {
            let passing = if p.mutability.is_some() {
                Passing::PtrMut
            } else {
                Passing::PtrConst
            };
            ((*p.elem).clone(), passing)
        }
        Type::Path(path) if array_view(path).is_some() => {
            let (elem, passing) = array_view(path).unwrap();
            (elem, passing)
        }
        Type::ImplTrait(t) => {
            return Err(Error::new_spanned(
                t,
                "`impl Trait` cannot be a kernel parameter",
            ))
        }
        _ => (ty.clone(), Passing::Value),
    };
    Ok(Param {
        name,
        mutable_binding,
        ty,
        elem,
        passing,
        ownership: parse_ownership(&typed.attrs)?,
        reduce_op: None,
    })
}

/// The operation of a `#[reduce(op)]` or `#[reduce]` attribute among `attrs`, as the path of its
/// type in `offload::reduce`, with the attribute's span.
fn parse_reduce(attrs: &[Attribute]) -> Result<Option<(syn::Path, Span)>> {
    let mut found = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("reduce")) {
        if found.is_some() {
            return Err(Error::new_spanned(attr, "one #[reduce] per parameter"));
        }
        let op = match &attr.meta {
            syn::Meta::Path(_) => "Own".to_string(),
            _ => {
                let op: Ident = attr
                    .parse_args()
                    .map_err(|_| unknown_reduction(attr.span(), "?"))?;
                match op.to_string().as_str() {
                    "sum" => "Sum",
                    "product" => "Product",
                    "min" => "Min",
                    "max" => "Max",
                    other => return Err(unknown_reduction(op.span(), other)),
                }
                .to_string()
            }
        };
        let op = Ident::new(&op, attr.span());
        found = Some((syn::parse_quote! { ::offload::reduce::#op }, attr.span()));
    }
    Ok(found)
}

fn unknown_reduction(span: Span, written: &str) -> Error {
    Error::new(
        span,
        format!(
            "unknown reduction `{written}`: write #[reduce(sum)], #[reduce(product)], \
             #[reduce(min)] or #[reduce(max)], or #[reduce] for a type that implements \
             offload::Reduce"
        ),
    )
}

/// `T` and the passing of a type written `ArrayViewN<T>` or `ArrayViewMutN<T>` (N = 1, 2, 3;
/// any path ending so, lifetimes allowed).
fn array_view(path: &syn::TypePath) -> Option<(Type, Passing)> {
    let last = path.path.segments.last()?;
    let name = last.ident.to_string();
    let (mutable, rank) = match name.strip_prefix("ArrayViewMut") {
        Some(rank) => (true, rank),
        None => (false, name.strip_prefix("ArrayView")?),
    };
    let rank: usize = match rank {
        "1" => 1,
        "2" => 2,
        "3" => 3,
        _ => return None,
    };
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let elem = args.args.iter().find_map(|a| match a {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    })?;
    Some((
        elem,
        if mutable {
            Passing::NdMut(rank)
        } else {
            Passing::Nd(rank)
        },
    ))
}

/// `T` of a slice element written `Atomic<T>` (any path ending in `Atomic`).
fn atomic_elem(elem: &Type) -> Option<Type> {
    let Type::Path(path) = elem else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Atomic" {
        return None;
    }
    match &last.arguments {
        PathArguments::AngleBracketed(args) if args.args.len() == 1 => match &args.args[0] {
            GenericArgument::Type(inner) => Some(inner.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// How a `&mut [T]` parameter's elements are shared out, when not grid-stride.
pub enum Ownership {
    /// `#[tile(len)]`.
    Tile(Expr),
    /// `#[scatter(index)]`.
    Scatter(Ident),
    /// `#[wide]`.
    Wide,
    /// `#[grid(nx, ny)]` or `#[grid(nx, ny, nz)]`: the extents.
    Grid(Vec<Expr>),
}

/// The ownership attribute among `attrs` (`#[tile(..)]`, `#[scatter(..)]`, `#[wide]` or
/// `#[grid(..)]`), with its span.
fn parse_ownership(attrs: &[Attribute]) -> Result<Option<(Ownership, Span)>> {
    let mut found = None;
    for attr in attrs {
        let ownership = if attr.path().is_ident("tile") {
            Ownership::Tile(attr.parse_args::<Expr>()?)
        } else if attr.path().is_ident("scatter") {
            Ownership::Scatter(attr.parse_args::<Ident>()?)
        } else if attr.path().is_ident("wide") {
            attr.meta.require_path_only()?;
            Ownership::Wide
        } else if attr.path().is_ident("grid") {
            let extents = attr.parse_args_with(
                syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
            )?;
            if !(2..=3).contains(&extents.len()) {
                return Err(Error::new_spanned(
                    attr,
                    "#[grid(nx, ny)] or #[grid(nx, ny, nz)]: two or three extents",
                ));
            }
            Ownership::Grid(extents.into_iter().collect())
        } else {
            continue;
        };
        if found.is_some() {
            return Err(Error::new_spanned(
                attr,
                "one ownership attribute per parameter (#[tile(..)], #[scatter(..)], #[wide] or \
                 #[grid(..)])",
            ));
        }
        found = Some((ownership, attr.span()));
    }
    Ok(found)
}
