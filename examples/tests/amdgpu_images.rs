//! The AMD GPU images (HSA code objects) of the example kernels, checked as far as a machine
//! without an AMD GPU can: for each architecture the build made (by default gfx90a, gfx942 and
//! gfx1100), the ELF header names it, the metadata lists every kernel with its arguments where
//! the host launcher packs them, `llvm-objdump --mcpu=ARCH` decodes every instruction, no symbol
//! is undefined, and the kernels with barriers, LDS, atomics and wavefront operations are there
//! and use the instructions they should.
//!
//! Without device images or without the LLVM tools these tests print `SKIPPED` and pass, unless
//! `OFFLOAD_REQUIRE_DEVICE_BUILD=1` (scripts/test), which also requires an image for each of
//! the architectures of `OFFLOAD_AMDGPU_ARCH_OFFLOAD_EXAMPLES`, else of `OFFLOAD_AMDGPU_ARCH`
//! (default: offload-build's three).

use offload::half::f16;
use offload::{DeviceImage, ImageFormat, ImageSet};
use offload_build::hsa_code_object::{self, CodeObject, KernelMetadata};
use offload_examples::kernels::block::GemmDims;
use offload_examples::kernels::Grid2;
use std::io::Write;
use std::mem::{align_of, size_of};
use std::path::PathBuf;
use std::process::Command;

fn required() -> bool {
    std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1")
}

fn skip(test: &str, why: &str) {
    if required() {
        panic!("{test}: OFFLOAD_REQUIRE_DEVICE_BUILD=1 but {why}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The architectures the build was asked for.
fn archs() -> Vec<String> {
    let var = std::env::var("OFFLOAD_AMDGPU_ARCH_OFFLOAD_EXAMPLES")
        .or_else(|_| std::env::var("OFFLOAD_AMDGPU_ARCH"));
    match var {
        Ok(list) if list.trim() == "none" => Vec::new(),
        Ok(list) if !list.trim().is_empty() => {
            list.split(',').map(|a| a.trim().to_string()).collect()
        }
        _ => offload_build::DEFAULT_AMDGPU_ARCHS
            .iter()
            .map(|a| a.to_string())
            .collect(),
    }
}

/// Each requested architecture's code object, read; `None` (skipped) without AMD images.
fn code_objects(test: &str) -> Option<Vec<(String, &'static DeviceImage, CodeObject)>> {
    let images: &ImageSet = &offload_examples::__OFFLOAD_IMAGES;
    let found: Vec<_> = archs()
        .into_iter()
        .filter_map(|arch| {
            let image = images
                .images
                .iter()
                .find(|i| i.format == ImageFormat::HsaCodeObject && i.target == arch)?;
            let object = hsa_code_object::read(image.bytes)
                .unwrap_or_else(|e| panic!("{arch}: not a readable code object: {e}"));
            Some((arch, image, object))
        })
        .collect();
    if found.is_empty() || found.len() < archs().len() {
        let why = match images.unavailable {
            Some(reason) => format!("no device images ({reason})"),
            None => format!(
                "AMD images for {:?} of {:?} (see the build's cargo warnings)",
                found.iter().map(|f| &f.0).collect::<Vec<_>>(),
                archs()
            ),
        };
        skip(test, &why);
        return None;
    }
    Some(found)
}

/// An LLVM tool of at least LLVM 22: `OFFLOAD_LLVM_BIN`, else `NAME-22`.. on PATH, else `NAME`.
fn llvm_tool(name: &str) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = std::env::var_os("OFFLOAD_LLVM_BIN")
        .into_iter()
        .map(PathBuf::from)
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ))
        .collect();
    let names: Vec<String> = (22..=26)
        .map(|v| format!("{name}-{v}"))
        .chain([name.to_string()])
        .collect();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// `image` written to a file of its own (per test: tests run at once), for the LLVM tools.
fn image_file(test: &str, arch: &str, image: &DeviceImage) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("offload-amdgpu-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{test}.{arch}.hsaco"));
    std::fs::write(&path, image.bytes).unwrap();
    path
}

fn tool_output(tool: &PathBuf, args: &[&str], file: &PathBuf) -> String {
    let out = Command::new(tool).args(args).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}",
        tool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kernel<'a>(object: &'a CodeObject, name: &str) -> &'a KernelMetadata {
    object
        .kernels
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("{}: no kernel {name} in the metadata", object.arch))
}

#[test]
fn elf_header_names_the_architecture() {
    let Some(objects) = code_objects("elf_header_names_the_architecture") else {
        return;
    };
    let readelf = llvm_tool("llvm-readelf");
    for (arch, image, object) in &objects {
        assert_eq!(image.format, ImageFormat::HsaCodeObject);
        assert_eq!(&object.arch, arch, "e_flags");
        assert_eq!(object.target, format!("amdgcn-amd-amdhsa--{arch}"));
        assert_eq!(object.version, 5, "code object v5");
        let Some(readelf) = &readelf else { continue };
        let header = tool_output(readelf, &["-h"], &image_file("readelf", arch, image));
        assert!(
            header.contains("OS/ABI:                            AMDGPU - HSA"),
            "{header}"
        );
        let flags = header
            .lines()
            .find(|l| l.trim_start().starts_with("Flags:"))
            .unwrap();
        assert!(
            flags.split([' ', ',']).any(|w| w == arch),
            "{arch}: llvm-readelf says {flags}"
        );
    }
    if readelf.is_none() {
        skip(
            "elf_header_names_the_architecture (llvm-readelf)",
            "no llvm-readelf",
        );
    }
}

#[test]
fn metadata_lists_every_kernel() {
    let Some(objects) = code_objects("metadata_lists_every_kernel") else {
        return;
    };
    let images: &ImageSet = &offload_examples::__OFFLOAD_IMAGES;
    for (arch, _, object) in &objects {
        let names: Vec<&str> = object.kernels.iter().map(|k| k.name.as_str()).collect();
        for k in images.kernels {
            assert!(names.contains(k), "{arch}: {k} missing from {names:?}");
        }
        assert_eq!(names.len(), images.kernels.len(), "{arch}: {names:?}");
        for k in &object.kernels {
            assert!(
                k.args.iter().all(|a| !a.is_hidden()),
                "{arch}: kernel {} has hidden arguments, which liboffload would have to fill: {:?}",
                k.name,
                k.args
            );
            let expected = if *arch == "gfx1100" { 32 } else { 64 };
            assert_eq!(k.wavefront_size, expected, "{arch}: {}", k.name);
        }
    }
}

/// A parameter as the host launcher packs it: name, size, alignment.
type Packed = (String, usize, usize);

fn value<T>(name: &str) -> Packed {
    (name.to_string(), size_of::<T>(), align_of::<T>())
}

/// A slice or pointee: its device address and its length, two 64-bit words.
fn slice(name: &str) -> [Packed; 2] {
    [
        (format!("{name}__ptr"), 8, 8),
        (format!("{name}__len"), 8, 8),
    ]
}

/// Kernels whose parameters cover every kind of packing: scalars of 1, 2, 4 and 8 bytes,
/// `#[repr(C)]` structs of 12 bytes (by pointer in rustc's own amdgcn ABI), slices, raw
/// pointers and `&T`, generic instances.
fn launcher_layouts() -> Vec<(&'static str, Vec<Packed>)> {
    let cat = |parts: Vec<Vec<Packed>>| parts.concat();
    vec![
        (
            "saxpy",
            cat(vec![
                vec![value::<f32>("a")],
                slice("x").into(),
                slice("y").into(),
            ]),
        ),
        (
            "stencil5",
            cat(vec![
                vec![value::<Grid2>("grid")],
                slice("input").into(),
                slice("output").into(),
            ]),
        ),
        (
            "add_sub",
            cat(vec![
                vec![value::<bool>("negate")],
                slice("a").into(),
                slice("b").into(),
                slice("sum").into(),
                slice("diff").into(),
            ]),
        ),
        (
            "jacobi2d",
            cat(vec![
                vec![value::<u32>("width"), value::<u32>("height")],
                slice("input").into(),
                slice("output").into(),
            ]),
        ),
        (
            "sgemm",
            cat(vec![
                vec![value::<GemmDims>("dims")],
                slice("a").into(),
                slice("b").into(),
                slice("c").into(),
            ]),
        ),
        (
            "axpy__f16",
            cat(vec![
                vec![value::<f16>("a")],
                slice("x").into(),
                slice("y").into(),
            ]),
        ),
        (
            "axpy__f64",
            cat(vec![
                vec![value::<f64>("a")],
                slice("x").into(),
                slice("y").into(),
            ]),
        ),
        (
            "iota_fixed",
            cat(vec![
                slice("x").into(),
                vec![value::<f64>("offset")],
                slice("step").into(),
            ]),
        ),
        (
            "warp_operations",
            cat(vec![
                vec![value::<u32>("live_lanes")],
                slice("values").into(),
                slice("out").into(),
            ]),
        ),
    ]
}

#[test]
fn arguments_sit_where_the_host_launcher_packs_them() {
    let Some(objects) = code_objects("arguments_sit_where_the_host_launcher_packs_them") else {
        return;
    };
    for (arch, _, object) in &objects {
        for (name, params) in launcher_layouts() {
            let k = kernel(object, name);
            let mut end = 0usize;
            let mut expected = Vec::new();
            for (param, size, align) in &params {
                let at = end.next_multiple_of(*align);
                expected.push((Some(param.clone()), at as u64, *size as u64));
                end = at + size;
            }
            let got: Vec<_> = k
                .args
                .iter()
                .map(|a| (a.name.clone(), a.offset, a.size))
                .collect();
            assert_eq!(got, expected, "{arch}: kernel {name}");
            assert!(
                k.kernarg_segment_size >= end as u64,
                "{arch}: kernel {name}"
            );
        }
    }
}

#[test]
fn every_instruction_decodes_for_its_architecture() {
    let Some(objects) = code_objects("every_instruction_decodes_for_its_architecture") else {
        return;
    };
    let Some(objdump) = llvm_tool("llvm-objdump") else {
        skip(
            "every_instruction_decodes_for_its_architecture",
            "no llvm-objdump",
        );
        return;
    };
    for (arch, image, object) in &objects {
        let text = tool_output(
            &objdump,
            &["-d", &format!("--mcpu={arch}")],
            &image_file("objdump", arch, image),
        );
        let undecoded: Vec<&str> = text.lines().filter(|l| l.contains(".long")).collect();
        assert!(
            undecoded.is_empty(),
            "{arch}: {} words llvm-objdump cannot decode, e.g. {:?}",
            undecoded.len(),
            &undecoded[..undecoded.len().min(5)]
        );
        for k in &object.kernels {
            assert!(
                text.contains(&format!("<{}>:", k.name)),
                "{arch}: no code for {}",
                k.name
            );
        }
        // The kernels that need them use barriers, LDS, atomics and cross-lane operations.
        let body = |name: &str| -> String {
            let start = text.find(&format!("<{name}>:")).unwrap();
            let rest = &text[start..];
            let end = rest[1..].find("\n\n").map_or(rest.len(), |e| e + 1);
            rest[..end].to_string()
        };
        for (name, needle) in [
            ("block_sum", "s_barrier"),
            ("block_sum", "ds_"),
            ("reverse_chunks_dynamic", "ds_"),
            ("warp_operations", "ds_bpermute"),
            ("histogram", "_atomic_"),
            ("atomic_operations", "_atomic_"),
        ] {
            assert!(
                body(name).contains(needle),
                "{arch}: {name} has no {needle} instruction"
            );
        }
        for name in ["block_sum", "reverse_chunks", "sgemm"] {
            assert!(
                kernel(object, name).group_segment_fixed_size > 0,
                "{arch}: {name} uses no LDS"
            );
        }
    }
}

#[test]
fn no_symbol_is_undefined() {
    let Some(objects) = code_objects("no_symbol_is_undefined") else {
        return;
    };
    let nm = llvm_tool("llvm-nm");
    for (arch, image, object) in &objects {
        assert!(
            object.undefined_symbols.is_empty(),
            "{arch}: {:?}",
            object.undefined_symbols
        );
        if let Some(nm) = &nm {
            let undefined = tool_output(nm, &["-u"], &image_file("nm", arch, image));
            assert!(undefined.trim().is_empty(), "{arch}: {undefined}");
        }
    }
    if nm.is_none() {
        skip("no_symbol_is_undefined (llvm-nm)", "no llvm-nm");
    }
}

/// `max_registers = 32` (kernels::register_cap) keeps `opposite_chains_capped` within 32 vector
/// registers per lane on every architecture (LLVM's `"amdgpu-num-vgpr"`, 16 on gfx90a and gfx942,
/// whose budget LLVM counts in pairs), spilling the rest to scratch memory, while the same code
/// uncapped uses more: the cap is what brings the count down. (32 is as low as the count of a
/// kernel that can panic goes: its panic path's call takes the thread's id in v31.)
#[test]
fn max_registers_caps_the_vector_registers_per_lane() {
    let Some(objects) = code_objects("max_registers_caps_the_vector_registers_per_lane") else {
        return;
    };
    let cap = 32;
    for (arch, _, object) in &objects {
        let free = kernel(object, "opposite_chains");
        let capped = kernel(object, "opposite_chains_capped");
        let _ = writeln!(
            std::io::stderr(),
            "{arch}: opposite_chains {} VGPRs, {} bytes of scratch; capped at {cap}: {} VGPRs, {} \
             bytes of scratch",
            free.vgpr_count,
            free.private_segment_fixed_size,
            capped.vgpr_count,
            capped.private_segment_fixed_size
        );
        assert!(
            free.vgpr_count > cap,
            "{arch}: uncapped, the kernel uses {} VGPRs: too few to show a cap of {cap}",
            free.vgpr_count
        );
        assert!(
            capped.vgpr_count <= cap,
            "{arch}: capped at {cap}, the kernel uses {} VGPRs",
            capped.vgpr_count
        );
        assert!(
            capped.private_segment_fixed_size > free.private_segment_fixed_size,
            "{arch}: capped, the kernel spills nothing more than uncapped"
        );
    }
}
