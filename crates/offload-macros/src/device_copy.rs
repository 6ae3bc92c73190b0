use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Error, Result};

pub fn expand(item: TokenStream) -> Result<TokenStream> {
    let input: DeriveInput = syn::parse2(item)?;
    let fields = match &input.data {
        Data::Struct(s) => &s.fields,
        _ => {
            return Err(Error::new_spanned(
                &input.ident,
                "DeviceCopy can be derived for structs only",
            ))
        }
    };
    let repr_c = input.attrs.iter().any(|a| {
        let mut c_layout = false;
        let parsed = a.path().is_ident("repr")
            && a.parse_nested_meta(|meta| {
                c_layout |= meta.path.is_ident("C") || meta.path.is_ident("transparent");
                // Skip the arguments of `align(N)` and `packed(N)`.
                if meta.input.peek(syn::token::Paren) {
                    let args;
                    syn::parenthesized!(args in meta.input);
                    args.parse::<TokenStream>()?;
                }
                Ok(())
            })
            .is_ok();
        parsed && c_layout
    });
    if !repr_c {
        return Err(Error::new_spanned(
            &input.ident,
            "DeviceCopy needs #[repr(C)] (or #[repr(transparent)]): Rust's default layout may differ between host and device",
        ));
    }
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let field_types = fields.iter().map(|f| &f.ty);
    Ok(quote! {
        // SAFETY: the struct is repr(C) and every field is DeviceCopy (checked below), so its
        // bytes mean the same on host and device.
        unsafe impl #impl_generics ::offload::DeviceCopy for #name #ty_generics #where_clause {}
        const _: () = {
            fn assert_fields_device_copy #impl_generics () #where_clause {
                fn is_device_copy<T: ::offload::DeviceCopy>() {}
                #( is_device_copy::<#field_types>(); )*
            }
        };
    })
}
