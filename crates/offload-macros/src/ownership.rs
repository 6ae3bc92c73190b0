//! Ownership attributes of `&mut [T]` kernel parameters, which replace the grid-stride
//! `ThreadSlice` in the body for the whole launch:
//! - `#[tile(len)]`: `offload::BlockTiles<T>`, tiles of `len` elements each owned by one block;
//! - `#[scatter(index)]`: `offload::Scattered<T, I>`, element `index[i]` owned by the thread that
//!   owns position `i` of the `&[I]` parameter `index`. Race-free only if `index` holds no value
//!   twice, which the launcher's caller vouches for: the launcher becomes `unsafe`;
//! - `#[wide]`: `offload::WideSlice<T>`, updated 16 bytes per access, chunks owned grid-stride;
//! - `#[grid(nx, ny)]`, `#[grid(nx, ny, nz)]`: `offload::GridOut2<T>` / `GridOut3<T>`, the
//!   points of a grid written by a stencil, column strips owned grid-stride.
//!
//! Block-tiled ownership is race-free only if every thread of the launch cuts the slice into the
//! same tiles, and grid ownership only if every thread sees the same extents, so `len` and the
//! extents are restricted to what is the same in every thread: integer literals,
//! constants (const generics included), the kernel's by-value parameters and their fields, the
//! `len()` of its slice parameters, combined with `+ - * / % << >> & | ^`, parentheses and `as`
//! casts. Each leaf is converted `as usize` and the arithmetic is the built-in one on `usize`, so
//! no user code (an operator or `Deref` impl) runs: nothing can make it depend on the thread.

use crate::params::{Ownership, Param, Passing};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{BinOp, Error, Expr, Ident, Member, Result, Type};

const WHAT_LEN_MAY_USE: &str = "tile lengths and grid extents must be the same in every thread: use integer \
     literals, constants, the kernel's by-value parameters (and their fields), `x.len()` of its slice \
     parameters, `+ - * / % << >> & | ^`, parentheses and `as` casts";

/// The statement that turns the body's `ThreadSlice` parameter `p` into the view its ownership
/// attribute names.
pub fn convert(
    p: &Param,
    ownership: &Ownership,
    span: Span,
    params: &[Param],
) -> Result<TokenStream> {
    if !matches!(p.passing, Passing::SliceMut) {
        return Err(Error::new(
            span,
            "#[tile(..)], #[scatter(..)], #[wide] and #[grid(..)] apply to `&mut [T]` parameters \
             (outputs)",
        ));
    }
    match ownership {
        Ownership::Tile(len) => tiles(p, len, span, params),
        Ownership::Scatter(index) => scatter(p, index, span, params),
        Ownership::Wide => Ok(wide(p, span)),
        Ownership::Grid(extents) => grid(p, extents, span, params),
    }
}

/// The `# Safety` clause that `#[scatter(..)]` parameters add to the launcher, if any.
pub fn scatter_contract(params: &[Param]) -> Option<String> {
    let clauses: Vec<String> = params
        .iter()
        .filter_map(|p| match &p.ownership {
            Some((Ownership::Scatter(index), _)) => Some(format!(
                "`{index}` holds no value twice (each element `{}[{index}[i]]` is written by one thread)",
                p.name
            )),
            _ => None,
        })
        .collect();
    (!clauses.is_empty()).then(|| format!("# Safety\n{}.", clauses.join("; ")))
}

fn scatter(p: &Param, index: &Ident, span: Span, params: &[Param]) -> Result<TokenStream> {
    if !params
        .iter()
        .any(|q| q.name == *index && matches!(q.passing, Passing::Slice))
    {
        return Err(Error::new_spanned(
            index,
            "#[scatter(index)] names a `&[u32]`, `&[u64]` or `&[usize]` parameter of the kernel",
        ));
    }
    let name = &p.name;
    Ok(quote_spanned! {span=>
        #[allow(unused_mut)]
        let mut #name = {
            // SAFETY: the parameter's own memory, consumed here so the body reaches it only
            // through `#index`, which the launcher's caller vouches holds no value twice.
            unsafe { ::offload::Scattered::from_thread_slice(#name, #index) }
        };
    })
}

fn wide(p: &Param, span: Span) -> TokenStream {
    let name = &p.name;
    quote_spanned! {span=>
        #[allow(unused_mut)]
        let mut #name = {
            // SAFETY: the parameter's own memory, consumed here so the body reaches it only in
            // 16-byte chunks shared out one way.
            unsafe { ::offload::WideSlice::from_thread_slice(#name) }
        };
    }
}

fn tiles(p: &Param, len: &Expr, span: Span, params: &[Param]) -> Result<TokenStream> {
    let len = uniform(len, params)?;
    let name = &p.name;
    Ok(quote_spanned! {span=>
        #[allow(unused_mut)]
        let mut #name = {
            let tile_len: usize = #len;
            // SAFETY: the parameter's own memory, consumed here so the body reaches it only as
            // tiles; `tile_len` depends on nothing but launch-wide values, so every thread cuts
            // the same tiles.
            unsafe { ::offload::BlockTiles::from_thread_slice(#name, tile_len) }
        };
    })
}

fn grid(p: &Param, extents: &[Expr], span: Span, params: &[Param]) -> Result<TokenStream> {
    let extents = extents
        .iter()
        .map(|e| uniform(e, params))
        .collect::<Result<Vec<_>>>()?;
    let view = match extents.len() {
        2 => quote! { ::offload::GridOut2 },
        _ => quote! { ::offload::GridOut3 },
    };
    let name = &p.name;
    Ok(quote_spanned! {span=>
        #[allow(unused_mut)]
        let mut #name = {
            // SAFETY: the parameter's own memory, consumed here so the body reaches it only as
            // a grid's points; the extents depend on nothing but launch-wide values, so every
            // thread shares the points out the same way.
            unsafe { #view::from_thread_slice(#name, #(#extents),*) }
        };
    })
}

/// `expr` rewritten over `usize`, or an error if it may differ between threads.
fn uniform(expr: &Expr, params: &[Param]) -> Result<TokenStream> {
    let param = |id: &Ident| params.iter().find(|p| p.name == *id);
    match expr {
        Expr::Lit(lit) if matches!(lit.lit, syn::Lit::Int(_)) => Ok(quote! { (#lit as usize) }),
        Expr::Paren(e) => uniform(&e.expr, params),
        Expr::Group(e) => uniform(&e.expr, params),
        Expr::Cast(e) => uniform(&e.expr, params),
        Expr::Binary(b) if arithmetic(&b.op) => {
            let (l, op, r) = (uniform(&b.left, params)?, &b.op, uniform(&b.right, params)?);
            Ok(quote! { (#l #op #r) })
        }
        Expr::Path(path) if path.qself.is_none() => match path.path.get_ident().and_then(param) {
            Some(p) if matches!(p.passing, Passing::Value) => Ok(quote! { (#path as usize) }),
            Some(p) => Err(Error::new_spanned(
                path,
                format!(
                    "`{}` is not a by-value parameter; {WHAT_LEN_MAY_USE}",
                    p.name
                ),
            )),
            // Not a parameter: a constant (a `static mut` would need `unsafe` and fail).
            None => Ok(quote! { (#path as usize) }),
        },
        Expr::Field(f) => {
            let value = match &*f.base {
                Expr::Path(b) => b.path.get_ident().and_then(param),
                _ => None,
            };
            let Some(p) = value.filter(|p| matches!(p.passing, Passing::Value)) else {
                return Err(Error::new_spanned(f, WHAT_LEN_MAY_USE));
            };
            // A struct pattern reaches the field without auto-deref (no `Deref` impl runs).
            let Type::Path(ty) = &p.ty else {
                return Err(Error::new_spanned(f, WHAT_LEN_MAY_USE));
            };
            let mut ty = ty.path.clone();
            if let Some(last) = ty.segments.last_mut() {
                last.arguments = syn::PathArguments::None;
            }
            let (base, member) = (&p.name, &f.member);
            let member = match member {
                Member::Named(id) => quote! { #id },
                Member::Unnamed(i) => quote! { #i },
            };
            Ok(
                quote! { ({ let #ty { #member: __offload_field, .. } = #base; __offload_field as usize }) },
            )
        }
        Expr::MethodCall(m) if m.method == "len" && m.args.is_empty() && m.turbofish.is_none() => {
            let slice = match &*m.receiver {
                Expr::Path(r) => r.path.get_ident().and_then(param),
                _ => None,
            };
            match slice {
                // An inherent `len`: slices', `ThreadSlice`'s, `BlockTiles`'s.
                Some(p)
                    if matches!(
                        p.passing,
                        Passing::Slice | Passing::SliceMut | Passing::Atomic
                    ) =>
                {
                    let name = &p.name;
                    Ok(quote! { #name.len() })
                }
                _ => Err(Error::new_spanned(m, WHAT_LEN_MAY_USE)),
            }
        }
        other => Err(Error::new_spanned(other, WHAT_LEN_MAY_USE)),
    }
}

fn arithmetic(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::Add(_)
            | BinOp::Sub(_)
            | BinOp::Mul(_)
            | BinOp::Div(_)
            | BinOp::Rem(_)
            | BinOp::Shl(_)
            | BinOp::Shr(_)
            | BinOp::BitAnd(_)
            | BinOp::BitOr(_)
            | BinOp::BitXor(_)
    )
}
