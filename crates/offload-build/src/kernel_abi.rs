//! The kernel ABI check of AMD images: every kernel of a code object takes its arguments exactly
//! where the launcher packs them.
//!
//! The launcher packs one parameter buffer per launch, a C struct of the kernel's device
//! parameters (values by value, each slice and pointee as a pointer and a length), which
//! liboffload copies into the kernarg segment. The AMD link step declares each parameter with the
//! size and alignment rustc gives its type, and the backend lays the kernarg segment out itself:
//! this compares what the code object's metadata says it did with the C layout, argument by
//! argument.

use crate::hsa_code_object::{CodeObject, KernelMetadata};

/// A kernel's device parameter as the device build compiled it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSlot {
    pub name: String,
    pub size: u64,
    pub align: u64,
}

/// A kernel entry and its parameters, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kernel: String,
    pub params: Vec<ParamSlot>,
}

/// Offsets of `params` in a C struct of them, and where the last one ends: the bytes a launch
/// passes (a C struct's trailing padding is not part of the parameters, and the kernarg segment
/// need not hold it).
pub fn c_layout(params: &[ParamSlot]) -> (Vec<u64>, u64) {
    let mut end = 0u64;
    let offsets = params
        .iter()
        .map(|p| {
            let at = end.next_multiple_of(p.align.max(1));
            end = at + p.size;
            at
        })
        .collect();
    (offsets, end)
}

/// Where liboffload's AMDGPU plugin writes the implicit (hidden) arguments after a parameter
/// buffer of `bytes`: the next 8-byte boundary.
fn hidden_arguments_start(bytes: u64) -> u64 {
    bytes.next_multiple_of(8)
}

/// Checks a code object built for `arch` against the entries the device build compiled.
pub fn check(arch: &str, object: &CodeObject, entries: &[Entry]) -> Result<(), String> {
    if object.arch != arch {
        return Err(format!(
            "the code object built for {arch} names {} in its ELF header",
            object.arch
        ));
    }
    if object.version != 5 {
        return Err(format!(
            "the code object for {arch} is code object v{}, not v5",
            object.version
        ));
    }
    if !object.undefined_symbols.is_empty() {
        return Err(format!(
            "the code object for {arch} leaves symbols undefined: {}",
            object.undefined_symbols.join(", ")
        ));
    }
    for entry in entries {
        let kernel = object
            .kernels
            .iter()
            .find(|k| k.name == entry.kernel)
            .ok_or_else(|| {
                format!(
                    "kernel {}: missing from the metadata of the code object for {arch}",
                    entry.kernel
                )
            })?;
        check_kernel(arch, kernel, entry)?;
    }
    if let Some(extra) = object
        .kernels
        .iter()
        .find(|k| !entries.iter().any(|e| e.kernel == k.name))
    {
        return Err(format!(
            "kernel {}: in the code object for {arch}, but not a kernel of the device build",
            extra.name
        ));
    }
    Ok(())
}

fn check_kernel(arch: &str, kernel: &KernelMetadata, entry: &Entry) -> Result<(), String> {
    let name = &entry.kernel;
    let (offsets, end) = c_layout(&entry.params);
    let explicit: Vec<_> = kernel.args.iter().filter(|a| !a.is_hidden()).collect();
    // Zero-sized parameters take no bytes and get no kernarg argument.
    let expected: Vec<(usize, u64)> = entry
        .params
        .iter()
        .zip(&offsets)
        .enumerate()
        .filter(|(_, (p, _))| p.size > 0)
        .map(|(i, (_, &at))| (i, at))
        .collect();
    if explicit.len() != expected.len() {
        return Err(format!(
            "kernel {name} ({arch}): the code object takes {} arguments, the launcher packs {} ({})",
            explicit.len(),
            expected.len(),
            entry
                .params
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (arg, &(i, offset)) in explicit.iter().zip(&expected) {
        let param = &entry.params[i];
        let named_alike = arg.name.as_deref().is_none_or(|n| n == param.name);
        if arg.offset != offset || arg.size != param.size || !named_alike {
            return Err(format!(
                "kernel {name} ({arch}), argument `{}` (parameter {i}): the code object takes {} \
                 bytes at kernarg offset {}{}, the launcher packs {} bytes at offset {offset}",
                param.name,
                arg.size,
                arg.offset,
                arg.name
                    .as_deref()
                    .filter(|_| !named_alike)
                    .map(|n| format!(" named `{n}`"))
                    .unwrap_or_default(),
                param.size,
            ));
        }
    }
    if kernel.kernarg_segment_size < end {
        return Err(format!(
            "kernel {name} ({arch}): its kernarg segment has {} bytes, fewer than the {end} of \
             its parameters",
            kernel.kernarg_segment_size
        ));
    }
    let hidden_start = hidden_arguments_start(end);
    if let Some(hidden) = kernel
        .args
        .iter()
        .find(|a| a.is_hidden() && a.offset < hidden_start)
    {
        return Err(format!(
            "kernel {name} ({arch}): hidden argument {} at offset {} overlaps the parameter \
             buffer, which ends at {end} (the runtime writes hidden arguments from {hidden_start})",
            hidden.value_kind, hidden.offset
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hsa_code_object::KernelArgument;

    fn slot(name: &str, size: u64, align: u64) -> ParamSlot {
        ParamSlot {
            name: name.into(),
            size,
            align,
        }
    }

    fn arg(name: &str, offset: u64, size: u64) -> KernelArgument {
        KernelArgument {
            name: Some(name.into()),
            offset,
            size,
            value_kind: "by_value".into(),
        }
    }

    fn object(args: Vec<KernelArgument>, kernarg: u64) -> CodeObject {
        CodeObject {
            arch: "gfx942".into(),
            target: "amdgcn-amd-amdhsa--gfx942".into(),
            version: 5,
            undefined_symbols: Vec::new(),
            kernels: vec![KernelMetadata {
                name: "k".into(),
                args,
                kernarg_segment_size: kernarg,
                group_segment_fixed_size: 0,
                private_segment_fixed_size: 0,
                sgpr_count: 10,
                vgpr_count: 4,
                wavefront_size: 64,
            }],
        }
    }

    fn entry() -> Entry {
        Entry {
            kernel: "k".into(),
            params: vec![
                slot("flag", 1, 1),
                slot("dims", 12, 4),
                slot("x__ptr", 8, 8),
                slot("x__len", 8, 8),
                slot("unit", 0, 1),
                slot("scale", 4, 4),
            ],
        }
    }

    #[test]
    fn c_layout_aligns_each_parameter() {
        let (offsets, end) = c_layout(&entry().params);
        assert_eq!(offsets, [0, 4, 16, 24, 32, 32]);
        assert_eq!(end, 36, "no trailing padding");
        assert_eq!(c_layout(&[]), (vec![], 0));
        assert_eq!(c_layout(&[slot("a", 3, 1)]), (vec![0], 3));
    }

    fn good_args() -> Vec<KernelArgument> {
        vec![
            arg("flag", 0, 1),
            arg("dims", 4, 12),
            arg("x__ptr", 16, 8),
            arg("x__len", 24, 8),
            arg("scale", 32, 4),
        ]
    }

    #[test]
    fn matching_layout_passes() {
        check("gfx942", &object(good_args(), 40), &[entry()]).unwrap();
        // Hidden arguments after the buffer are what liboffload fills in.
        let mut args = good_args();
        args.push(KernelArgument {
            name: None,
            offset: 40,
            size: 4,
            value_kind: "hidden_block_count_x".into(),
        });
        check("gfx942", &object(args, 296), &[entry()]).unwrap();
        // ... from the 8-byte boundary after the last parameter.
    }

    #[test]
    fn a_moved_argument_is_named() {
        let mut args = good_args();
        args[1] = arg("dims", 1, 12);
        let e = check("gfx942", &object(args, 40), &[entry()]).unwrap_err();
        assert_eq!(
            e,
            "kernel k (gfx942), argument `dims` (parameter 1): the code object takes 12 bytes at \
             kernarg offset 1, the launcher packs 12 bytes at offset 4"
        );
    }

    #[test]
    fn a_pointer_instead_of_a_value_is_caught() {
        let mut args = good_args();
        args[1] = arg("dims", 8, 8);
        let e = check("gfx942", &object(args, 40), &[entry()]).unwrap_err();
        assert!(e.contains("argument `dims` (parameter 1)"), "{e}");
    }

    #[test]
    fn other_mismatches() {
        let e = check("gfx942", &object(good_args()[..4].to_vec(), 40), &[entry()]).unwrap_err();
        assert!(e.contains("takes 4 arguments, the launcher packs 5"), "{e}");
        check("gfx942", &object(good_args(), 36), &[entry()]).unwrap();
        let e = check("gfx942", &object(good_args(), 32), &[entry()]).unwrap_err();
        assert!(
            e.contains("kernarg segment has 32 bytes, fewer than the 36"),
            "{e}"
        );
        let e = check("gfx90a", &object(good_args(), 40), &[entry()]).unwrap_err();
        assert!(e.contains("names gfx942"), "{e}");
        let mut missing = entry();
        missing.kernel = "other".into();
        let e = check("gfx942", &object(good_args(), 40), &[missing]).unwrap_err();
        assert!(e.contains("kernel other: missing"), "{e}");
        let e = check("gfx942", &object(good_args(), 40), &[]).unwrap_err();
        assert!(e.contains("not a kernel of the device build"), "{e}");
        let mut undefined = object(good_args(), 40);
        undefined.undefined_symbols.push("__udivti3".into());
        let e = check("gfx942", &undefined, &[entry()]).unwrap_err();
        assert!(e.contains("undefined: __udivti3"), "{e}");
        let mut hidden = good_args();
        hidden.push(KernelArgument {
            name: None,
            offset: 36,
            size: 4,
            value_kind: "hidden_block_count_x".into(),
        });
        let e = check("gfx942", &object(hidden, 296), &[entry()]).unwrap_err();
        assert!(e.contains("overlaps the parameter buffer"), "{e}");
    }
}
