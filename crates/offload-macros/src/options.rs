//! The options of `#[offload::kernel(...)]`: `fma` and `instances(...)`, comma-separated, in any
//! order.

use crate::instances::Declared;
use proc_macro2::Span;
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::{Error, Ident, Result, Token};

pub struct KernelOptions {
    /// `fma`: the kernel's float multiplies and adds may fuse into FMAs on the device.
    pub fma: Option<Span>,
    pub instances: Declared,
}

impl Parse for KernelOptions {
    fn parse(input: ParseStream) -> Result<Self> {
        let mut fma = None;
        let mut instances = None;
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "fma" && fma.is_none() {
                fma = Some(key.span());
            } else if key == "instances" && instances.is_none() {
                let group: proc_macro2::Group = input.parse()?;
                let mut tokens = key.to_token_stream();
                tokens.extend(group.into_token_stream());
                instances = Some(syn::parse2::<Declared>(tokens)?);
            } else if key == "fma" || key == "instances" {
                return Err(Error::new(key.span(), format!("`{key}` is given twice")));
            } else {
                return Err(Error::new(
                    key.span(),
                    "unknown kernel option; the options are `fma` and `instances(T = f32 | f64, ...)`",
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(KernelOptions {
            fma,
            instances: instances.unwrap_or_else(Declared::none),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<KernelOptions> {
        syn::parse_str(s)
    }

    #[test]
    fn options_in_any_order_once_each() {
        assert!(parse("").unwrap().fma.is_none());
        assert!(parse("fma").unwrap().fma.is_some());
        assert!(parse("instances(T = f32 | f64), fma")
            .unwrap()
            .fma
            .is_some());
        assert!(parse("fma, instances(T = f32)").unwrap().fma.is_some());
        let twice = parse("fma, fma").err().unwrap().to_string();
        assert_eq!(twice, "`fma` is given twice");
        let unknown = parse("fast").err().unwrap().to_string();
        assert!(unknown.starts_with("unknown kernel option"), "{unknown}");
    }
}
