//! The options of `#[offload::kernel(...)]`: `fma`, `fast_math`, `max_registers = N` and
//! `instances(...)`, comma-separated, in any order.

use crate::instances::Declared;
use proc_macro2::Span;
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::{Error, Ident, LitInt, Result, Token};

/// The largest register count a PTX `.maxnreg` directive can ask for (ptxas caps a thread at 255).
const MAX_REGISTERS: u32 = 255;

pub struct KernelOptions {
    /// `fma`: the kernel's float multiplies and adds may fuse into FMAs on the device.
    pub fma: Option<Span>,
    /// `fast_math`: the body sees `offload::math::fast` as `math`, and the device compiler gives
    /// the kernel approximate `f32` division and square roots, flush to zero and FMAs, as
    /// nvcc's `-use_fast_math`.
    pub fast_math: Option<Span>,
    /// `max_registers = N`: the device compiler gives each thread of the kernel at most `N`
    /// registers, as CUDA's `__launch_bounds__`/`-maxrregcount` (1 to 255); on AMD GPUs, `N`
    /// vector registers per lane.
    pub max_registers: Option<u32>,
    pub instances: Declared,
}

impl KernelOptions {
    /// The link section of the kernel's device entries, which tells offload-build's device
    /// linker the options that act on the generated code: `.offload` followed by `.fma`,
    /// `.fastmath` and `.maxnreg<N>` as given (the linker reads the words and drops the
    /// section). `None` without such options.
    pub fn entry_section(&self) -> Option<String> {
        let mut section = String::from(".offload");
        if self.fma.is_some() {
            section.push_str(".fma");
        }
        if self.fast_math.is_some() {
            section.push_str(".fastmath");
        }
        if let Some(n) = self.max_registers {
            section.push_str(&format!(".maxnreg{n}"));
        }
        (section != ".offload").then_some(section)
    }
}

impl Parse for KernelOptions {
    fn parse(input: ParseStream) -> Result<Self> {
        let mut fma = None;
        let mut fast_math = None;
        let mut max_registers = None;
        let mut instances = None;
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "fma" && fma.is_none() {
                fma = Some(key.span());
            } else if key == "fast_math" && fast_math.is_none() {
                fast_math = Some(key.span());
            } else if key == "max_registers" && max_registers.is_none() {
                input.parse::<Token![=]>()?;
                max_registers = Some(register_count(&input.parse()?)?);
            } else if key == "instances" && instances.is_none() {
                let group: proc_macro2::Group = input.parse()?;
                let mut tokens = key.to_token_stream();
                tokens.extend(group.into_token_stream());
                instances = Some(syn::parse2::<Declared>(tokens)?);
            } else if ["fma", "fast_math", "max_registers", "instances"]
                .iter()
                .any(|k| key == k)
            {
                return Err(Error::new(key.span(), format!("`{key}` is given twice")));
            } else {
                return Err(Error::new(
                    key.span(),
                    "unknown kernel option; the options are `fma`, `fast_math`, \
                     `max_registers = N` and `instances(T = f32 | f64, ...)`",
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(KernelOptions {
            fma,
            fast_math,
            max_registers,
            instances: instances.unwrap_or_else(Declared::none),
        })
    }
}

/// The value of `max_registers = N`: an integer from 1 to 255.
fn register_count(lit: &LitInt) -> Result<u32> {
    let out_of_range = || {
        Error::new(
            lit.span(),
            format!("`max_registers` is a register count per thread, from 1 to {MAX_REGISTERS}"),
        )
    };
    let n: u32 = lit.base10_parse().map_err(|_| out_of_range())?;
    if n == 0 || n > MAX_REGISTERS {
        return Err(out_of_range());
    }
    Ok(n)
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
        assert!(parse("fast_math, fma").unwrap().fast_math.is_some());
        assert!(parse("fma").unwrap().fast_math.is_none());
        let twice = parse("fast_math, fast_math").err().unwrap().to_string();
        assert_eq!(twice, "`fast_math` is given twice");
        let unknown = parse("fast").err().unwrap().to_string();
        assert!(unknown.starts_with("unknown kernel option"), "{unknown}");
    }

    #[test]
    fn max_registers_is_a_count_from_1_to_255() {
        assert_eq!(parse("").unwrap().max_registers, None);
        assert_eq!(parse("max_registers = 24").unwrap().max_registers, Some(24));
        assert_eq!(parse("max_registers = 1").unwrap().max_registers, Some(1));
        let all = parse("instances(T = f32), max_registers = 255, fma").unwrap();
        assert_eq!((all.max_registers, all.fma.is_some()), (Some(255), true));
        let range = "`max_registers` is a register count per thread, from 1 to 255";
        for bad in ["0", "256", "100000000000000000000"] {
            let e = parse(&format!("max_registers = {bad}")).err().unwrap();
            assert_eq!(e.to_string(), range, "{bad}");
        }
        assert!(parse("max_registers = -3").is_err());
        assert!(parse("max_registers").is_err());
        assert!(parse("max_registers = 2.5").is_err());
        let twice = parse("max_registers = 24, max_registers = 32")
            .err()
            .unwrap();
        assert_eq!(twice.to_string(), "`max_registers` is given twice");
    }

    #[test]
    fn entry_section_names_the_code_options() {
        let section = |s: &str| parse(s).unwrap().entry_section();
        assert_eq!(section(""), None);
        assert_eq!(section("instances(T = f32)"), None);
        assert_eq!(section("fma").as_deref(), Some(".offload.fma"));
        assert_eq!(
            section("max_registers = 24").as_deref(),
            Some(".offload.maxnreg24")
        );
        assert_eq!(
            section("max_registers = 24, fma").as_deref(),
            Some(".offload.fma.maxnreg24")
        );
        assert_eq!(section("fast_math").as_deref(), Some(".offload.fastmath"));
        assert_eq!(
            section("max_registers = 64, fast_math, fma").as_deref(),
            Some(".offload.fma.fastmath.maxnreg64")
        );
    }
}
