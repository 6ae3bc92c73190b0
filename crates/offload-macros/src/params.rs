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
                     thread: use `&mut [T]` (each thread reaches its own elements) or `*mut T` \
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
    })
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
