//! The SPIR-V image (`OFFLOAD_SPIRV=1`): every kernel is an entry point, `spirv-val` accepts it,
//! every kernel buffer is a CrossWorkgroup pointer (no buffer in Function storage), exactly
//! the kernels with warp operations require sub-groups of 32, and no instruction is one that
//! Intel's OpenCL runtimes lack.
//!
//! Without `OFFLOAD_SPIRV=1` at build time these tests print `SKIPPED` and pass; with it and
//! `OFFLOAD_REQUIRE_DEVICE_BUILD=1` (scripts/test) a missing image or `spirv-val` fails them.

use offload::{ImageFormat, ImageSet};
use offload_build::spirv_image::{self, Param, Storage};
use std::io::Write;
use std::process::Command;

fn required() -> bool {
    std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1")
        && std::env::var("OFFLOAD_SPIRV").is_ok_and(|v| v == "1")
}

fn spirv(test: &str) -> Option<&'static [u8]> {
    let images: &ImageSet = &offload_examples::__OFFLOAD_IMAGES;
    let image = images
        .images
        .iter()
        .find(|i| i.format == ImageFormat::Spirv);
    if image.is_none() {
        assert!(
            !required(),
            "{test}: OFFLOAD_SPIRV=1 and OFFLOAD_REQUIRE_DEVICE_BUILD=1 but no SPIR-V image was built"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: no SPIR-V image (build with OFFLOAD_SPIRV=1)"
        );
    }
    image.map(|i| i.bytes)
}

#[test]
fn every_kernel_is_an_entry_point() {
    let Some(bytes) = spirv("every_kernel_is_an_entry_point") else {
        return;
    };
    let words = spirv_image::words(bytes).unwrap();
    let mut names: Vec<String> = spirv_image::kernels(&words)
        .unwrap()
        .into_iter()
        .map(|k| k.name)
        .collect();
    names.sort();
    let mut expected: Vec<String> = offload_examples::__OFFLOAD_IMAGES
        .kernels
        .iter()
        .map(|k| k.to_string())
        .collect();
    expected.sort();
    assert_eq!(names, expected);
    assert!(names.len() >= 29, "{names:?}");
}

#[test]
fn spirv_val_accepts_the_image() {
    let Some(bytes) = spirv("spirv_val_accepts_the_image") else {
        return;
    };
    let path = std::env::temp_dir().join(format!("offload-spirv-val-{}.spv", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let out = match Command::new("spirv-val")
        .args(["--target-env", "spv1.4"])
        .arg(&path)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            assert!(!required(), "spirv-val is required here: {e}");
            let _ = writeln!(std::io::stderr(), "SKIPPED: no spirv-val ({e})");
            return;
        }
    };
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "spirv-val: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn kernel_buffers_are_cross_workgroup() {
    let Some(bytes) = spirv("kernel_buffers_are_cross_workgroup") else {
        return;
    };
    let words = spirv_image::words(bytes).unwrap();
    spirv_image::check_kernel_abi(&words).unwrap();
    let kernels = spirv_image::kernels(&words).unwrap();
    let saxpy = kernels.iter().find(|k| k.name == "saxpy").unwrap();
    let buffer = Param::Pointer {
        storage: Storage::CrossWorkgroup,
        by_val: false,
    };
    // a, x (pointer, length), y (pointer, length), then the dynamic shared memory and its size.
    assert_eq!(
        saxpy.params,
        [
            Param::Other,
            buffer,
            Param::Int64,
            buffer,
            Param::Int64,
            Param::Pointer {
                storage: Storage::Workgroup,
                by_val: false
            },
            Param::Int64
        ]
    );
    // A struct by value (stencil5's `Dim3`-like extent) is a byval Function pointer, not a buffer.
    let stencil = kernels.iter().find(|k| k.name == "stencil5").unwrap();
    assert_eq!(
        stencil.params[0],
        Param::Pointer {
            storage: Storage::Function,
            by_val: true
        }
    );
    assert!(
        kernels.iter().all(|k| k.params.iter().all(|p| !matches!(
            p,
            Param::Pointer {
                storage: Storage::Function,
                by_val: false
            }
        ))),
        "no buffer in Function storage"
    );

    // The check catches the mistake a plain retargeting makes: buffers in Function storage.
    let mut broken = words.clone();
    retarget_pointers(&mut broken, 5, 7);
    let err = spirv_image::check_kernel_abi(&broken).unwrap_err();
    assert!(
        err.contains("saxpy: parameter 1 is a Function pointer, not a CrossWorkgroup buffer"),
        "{err}"
    );
}

/// Multiplies with overflow (`checked_mul`, in `checked_products` and every `#[tile(..)]` kernel)
/// are OpenCL's `mul_hi`, not SPIR-V's OpUMulExtended or OpSMulExtended, which Intel's OpenCL
/// runtimes lack (the whole image would fail to build there).
#[test]
fn no_multiply_extended_instructions() {
    let Some(bytes) = spirv("no_multiply_extended_instructions") else {
        return;
    };
    const OP_UMUL_EXTENDED: u32 = 151;
    const OP_SMUL_EXTENDED: u32 = 152;
    let words = spirv_image::words(bytes).unwrap();
    let mut at = 5;
    while at < words.len() {
        let opcode = words[at] & 0xffff;
        assert!(
            opcode != OP_UMUL_EXTENDED && opcode != OP_SMUL_EXTENDED,
            "opcode {opcode} at word {at}"
        );
        at += (words[at] >> 16) as usize;
    }
}

/// Rewrites every `OpTypePointer` of storage class `from` to `to`.
fn retarget_pointers(words: &mut [u32], from: u32, to: u32) {
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if words[at] & 0xffff == 32 && words[at + 2] == from {
            words[at + 2] = to;
        }
        at += count;
    }
}

#[test]
fn warp_kernels_require_sub_groups_of_32() {
    let Some(bytes) = spirv("warp_kernels_require_sub_groups_of_32") else {
        return;
    };
    let words = spirv_image::words(bytes).unwrap();
    let mut wrong = Vec::new();
    for k in spirv_image::kernels(&words).unwrap() {
        // The warp examples, and the tensor-core kernels (warp-level by nature: each lane
        // holds a piece of a fragment).
        let name = k.name.as_str();
        let uses_warps = matches!(
            name,
            "warp_operations" | "divergent_warp_sum" | "sgemm_tf32x3" | "dgemm"
        ) || ["fragments_from_shared", "gemm_bf16__", "mma_tiles_"]
            .iter()
            .any(|p| name.starts_with(p));
        // SPIR-V warps are 32 lanes wide (sub-groups of 32).
        let expected = uses_warps.then_some(32);
        if k.subgroup_size != expected {
            wrong.push(format!(
                "{}: {:?}, expected {expected:?}",
                k.name, k.subgroup_size
            ));
        }
    }
    assert!(wrong.is_empty(), "sub-group sizes: {wrong:#?}");
}
