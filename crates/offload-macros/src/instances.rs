//! The device instances of a generic kernel.
//!
//! The device pass compiles the kernels module on its own, so a generic kernel needs one
//! monomorphic entry point per set of generic arguments, known when the kernel is declared:
//! `#[offload::kernel(instances(T = f32 | f64, N = 2 | 4))]` asks for every combination (here
//! four). A kernel whose only generic parameter is a type bounded by nothing but marker traits
//! (`T: Copy`, as in std::offload's examples) can only copy its values around, so every
//! primitive `DeviceCopy` type fits: those are inferred when no instances are declared.

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Error, Expr, GenericParam, Generics, Ident, Result, Token, Type, TypeParamBound};

/// Element types a marker-bounded type parameter is instantiated with when none are declared.
const INFERRED_TYPES: &[&str] = &[
    "u8",
    "u16",
    "u32",
    "u64",
    "i8",
    "i16",
    "i32",
    "i64",
    "f32",
    "f64",
    "::offload::half::f16",
    "::offload::half::bf16",
];

/// Bounds that let a kernel do nothing with a value but copy it.
const MARKER_TRAITS: &[&str] = &["Copy", "Clone", "Send", "Sync", "Sized", "DeviceCopy"];

/// `T = f32 | f64` inside `instances(...)`, values kept as tokens until the parameter's kind is
/// known.
struct Choice {
    param: Ident,
    values: Vec<TokenStream>,
}

impl Parse for Choice {
    fn parse(input: ParseStream) -> Result<Self> {
        let param: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let mut values = vec![TokenStream::new()];
        while !input.is_empty() && !input.peek(Token![,]) {
            if input.peek(Token![|]) {
                input.parse::<Token![|]>()?;
                values.push(TokenStream::new());
            } else {
                let tt: proc_macro2::TokenTree = input.parse()?;
                values.last_mut().unwrap().extend([tt]);
            }
        }
        if values.iter().any(TokenStream::is_empty) {
            return Err(Error::new(
                param.span(),
                format!("`{param} = ...` needs values separated by `|`, e.g. {param} = f32 | f64"),
            ));
        }
        Ok(Choice { param, values })
    }
}

/// The attribute's arguments: nothing, or `instances(P = a | b, ...)`.
pub struct Declared(Option<(Span, Vec<Choice>)>);

impl Declared {
    /// No `instances(...)` option.
    pub fn none() -> Self {
        Declared(None)
    }
}

impl Parse for Declared {
    fn parse(input: ParseStream) -> Result<Self> {
        if input.is_empty() {
            return Ok(Declared(None));
        }
        let key: Ident = input.parse()?;
        if key != "instances" {
            return Err(Error::new(
                key.span(),
                "unknown kernel option; the only one is instances(T = f32 | f64, ...)",
            ));
        }
        let inner;
        syn::parenthesized!(inner in input);
        let choices = Punctuated::<Choice, Token![,]>::parse_terminated(&inner)?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after instances(...)"));
        }
        Ok(Declared(Some((key.span(), choices.into_iter().collect()))))
    }
}

/// A generic parameter of the kernel and the argument one instance gives it.
#[derive(Clone)]
pub enum Binding {
    Type { param: Ident, ty: Type },
    Const { param: Ident, ty: Type, value: Expr },
}

/// One monomorphic instance of a generic kernel.
pub struct Instance {
    /// In the order of the kernel's generic parameters.
    pub bindings: Vec<Binding>,
    /// Appended to the kernel's name for the device entry: `axpy__f32`.
    pub suffix: String,
}

impl Instance {
    /// The generic arguments, as in `body::<f32, { 4 }>`.
    pub fn args(&self) -> TokenStream {
        let args = self.bindings.iter().map(|b| match b {
            Binding::Type { ty, .. } => ty.to_token_stream(),
            Binding::Const { value, .. } => quote! { { #value } },
        });
        quote! { #(#args),* }
    }

    /// How the instance reads in messages: `f32, 4`.
    pub fn describe(&self) -> String {
        self.bindings
            .iter()
            .map(|b| match b {
                Binding::Type { ty, .. } => tidy(ty.to_token_stream()),
                Binding::Const { value, .. } => tidy(value.to_token_stream()),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Token text without the spaces `quote` puts around `::` and `<`.
pub fn tidy(tokens: TokenStream) -> String {
    tokens
        .to_string()
        .replace(" :: ", "::")
        .replace(":: ", "::")
        .replace(" < ", "<")
        .replace(" <", "<")
        .replace(" >", ">")
        .replace("& ", "&")
        .replace(" ,", ",")
        .replace("- ", "-")
}

/// Name part for one generic argument: the last path segment of a type (`half::f16` → `f16`),
/// otherwise its tokens with every other character made an underscore.
fn suffix_part(tokens: &TokenStream, ty: Option<&Type>) -> String {
    if let Some(Type::Path(p)) = ty {
        if p.qself.is_none() {
            if let Some(last) = p.path.segments.last() {
                if last.arguments.is_empty() {
                    return last.ident.to_string();
                }
            }
        }
    }
    let text: String = tokens
        .to_string()
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| match c {
            '-' => 'm',
            c if c.is_ascii_alphanumeric() => c,
            _ => '_',
        })
        .collect();
    let mut part = String::new();
    for c in text.chars() {
        if !(c == '_' && part.ends_with('_')) {
            part.push(c);
        }
    }
    part.trim_matches('_').to_string()
}

/// The instances to build for a kernel with `generics`: none for a plain kernel, else the
/// declared ones, else the inferred ones.
pub fn resolve(name: &Ident, generics: &Generics, declared: Declared) -> Result<Vec<Instance>> {
    let params: Vec<&GenericParam> = generics.params.iter().collect();
    if let Some(lifetime) = generics.lifetimes().next() {
        return Err(Error::new_spanned(
            lifetime,
            "an offload kernel takes no lifetime parameters: leave the lifetimes of its references elided",
        ));
    }
    let Some((span, choices)) = declared.0 else {
        if params.is_empty() {
            return Ok(Vec::new());
        }
        return infer(name, generics);
    };
    if params.is_empty() {
        return Err(Error::new(
            span,
            format!("kernel `{name}` has no generic parameters to declare instances of"),
        ));
    }
    for c in &choices {
        if !params.iter().any(|p| param_ident(p) == &c.param) {
            return Err(Error::new(
                c.param.span(),
                format!("kernel `{name}` has no generic parameter `{}`", c.param),
            ));
        }
        if choices.iter().filter(|o| o.param == c.param).count() > 1 {
            return Err(Error::new(
                c.param.span(),
                format!("`{}` is declared twice", c.param),
            ));
        }
    }
    // One list of bindings per parameter, in the kernel's order.
    let mut per_param: Vec<Vec<(Binding, String)>> = Vec::new();
    for p in &params {
        let ident = param_ident(p);
        let choice = choices.iter().find(|c| &c.param == ident).ok_or_else(|| {
            Error::new(
                span,
                format!(
                    "instances(...) of kernel `{name}` gives no values for `{ident}`, e.g. {ident} = {}",
                    if matches!(p, GenericParam::Const(_)) { "2 | 4" } else { "f32 | f64" }
                ),
            )
        })?;
        let mut bindings = Vec::new();
        for tokens in &choice.values {
            let binding = match p {
                GenericParam::Type(_) => {
                    let ty: Type = syn::parse2(tokens.clone())?;
                    let part = suffix_part(tokens, Some(&ty));
                    (
                        Binding::Type {
                            param: ident.clone(),
                            ty,
                        },
                        part,
                    )
                }
                GenericParam::Const(c) => {
                    let value: Expr = syn::parse2(tokens.clone())?;
                    let part = suffix_part(tokens, None);
                    (
                        Binding::Const {
                            param: ident.clone(),
                            ty: c.ty.clone(),
                            value,
                        },
                        part,
                    )
                }
                GenericParam::Lifetime(_) => unreachable!("rejected above"),
            };
            bindings.push(binding);
        }
        per_param.push(bindings);
    }
    let instances = product(&per_param);
    let mut seen = Vec::new();
    for i in &instances {
        if seen.contains(&i.suffix) {
            return Err(Error::new(
                span,
                format!(
                    "two instances of kernel `{name}` would share the device name `{name}__{}`; declare each once",
                    i.suffix
                ),
            ));
        }
        seen.push(i.suffix.clone());
    }
    Ok(instances)
}

fn param_ident(p: &GenericParam) -> &Ident {
    match p {
        GenericParam::Type(t) => &t.ident,
        GenericParam::Const(c) => &c.ident,
        GenericParam::Lifetime(l) => &l.lifetime.ident,
    }
}

/// Every combination of one binding per parameter.
fn product(per_param: &[Vec<(Binding, String)>]) -> Vec<Instance> {
    let mut out = vec![Instance {
        bindings: Vec::new(),
        suffix: String::new(),
    }];
    for choices in per_param {
        let mut next = Vec::new();
        for partial in &out {
            for (binding, part) in choices {
                let mut bindings = partial.bindings.clone();
                bindings.push(binding.clone());
                let suffix = if partial.suffix.is_empty() {
                    part.clone()
                } else {
                    format!("{}__{part}", partial.suffix)
                };
                next.push(Instance { bindings, suffix });
            }
        }
        out = next;
    }
    out
}

/// One type parameter bounded only by marker traits: every primitive `DeviceCopy` type.
fn infer(name: &Ident, generics: &Generics) -> Result<Vec<Instance>> {
    let how = format!(
        "declare the device instances of generic kernel `{name}`: #[offload::kernel(instances({}))]",
        generics
            .params
            .iter()
            .map(|p| match p {
                GenericParam::Const(c) => format!("{} = 2 | 4", c.ident),
                other => format!("{} = f32 | f64", param_ident(other)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut params = generics.params.iter();
    let (Some(GenericParam::Type(t)), None, None) =
        (params.next(), params.next(), &generics.where_clause)
    else {
        return Err(Error::new_spanned(&generics.params, how));
    };
    let markers_only = t.bounds.iter().all(|b| match b {
        TypeParamBound::Trait(tb) => tb
            .path
            .segments
            .last()
            .is_some_and(|s| MARKER_TRAITS.iter().any(|m| s.ident == m)),
        TypeParamBound::Lifetime(l) => l.ident == "static",
        _ => false,
    });
    if !markers_only {
        return Err(Error::new_spanned(&generics.params, how));
    }
    INFERRED_TYPES
        .iter()
        .map(|text| {
            let tokens: TokenStream = text.parse().unwrap();
            let ty: Type = syn::parse2(tokens.clone())?;
            let suffix = suffix_part(&tokens, Some(&ty));
            Ok(Instance {
                bindings: vec![Binding::Type {
                    param: t.ident.clone(),
                    ty,
                }],
                suffix,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn instances(generics: Generics, declared: &str) -> Result<Vec<String>> {
        let declared: Declared = syn::parse_str(declared)?;
        let name: Ident = parse_quote! { k };
        Ok(resolve(&name, &generics, declared)?
            .into_iter()
            .map(|i| format!("{} = {}", i.suffix, i.describe()))
            .collect())
    }

    #[test]
    fn declared_instances_are_every_combination_in_parameter_order() {
        let got = instances(
            parse_quote! { <T: Copy, const N: usize> },
            "instances(N = 2 | -1, T = f32 | half::f16)",
        )
        .unwrap();
        assert_eq!(
            got,
            [
                "f32__2 = f32, 2",
                "f32__m1 = f32, -1",
                "f16__2 = half::f16, 2",
                "f16__m1 = half::f16, -1"
            ]
        );
    }

    #[test]
    fn marker_bounds_infer_every_primitive() {
        let got = instances(parse_quote! { <T: Copy + Send> }, "").unwrap();
        assert_eq!(got.len(), INFERRED_TYPES.len());
        assert_eq!(got[0], "u8 = u8");
        assert_eq!(got[11], "bf16 = ::offload::half::bf16");
    }

    #[test]
    fn mistakes_are_errors() {
        let err = |g: Generics, d: &str| instances(g, d).unwrap_err().to_string();
        assert!(err(parse_quote! { <T: core::ops::Add> }, "")
            .starts_with("declare the device instances"));
        assert!(
            err(parse_quote! { <const N: usize> }, "").starts_with("declare the device instances")
        );
        assert_eq!(
            err(parse_quote! {}, "instances(T = f32)"),
            "kernel `k` has no generic parameters to declare instances of"
        );
        assert_eq!(
            err(parse_quote! { <T: Copy> }, "instances(T = f32 | f32)"),
            "two instances of kernel `k` would share the device name `k__f32`; declare each once"
        );
        assert_eq!(
            err(parse_quote! { <T: Copy, U: Copy> }, "instances(T = f32)"),
            "instances(...) of kernel `k` gives no values for `U`, e.g. U = f32 | f64"
        );
        assert!(err(parse_quote! { <T: Copy> }, "instances(T = )")
            .contains("needs values separated by `|`"));
        assert!(
            err(parse_quote! { <T: Copy> }, "shapes(T = f32)").starts_with("unknown kernel option")
        );
    }
}
