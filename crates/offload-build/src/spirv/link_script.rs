//! The linker of the SPIR-V device build: rustc's nvptx64 bitcode to a SPIR-V module.
//!
//! The same argument handling as the nvptx64 script (`crate::link_script`), then: the libraries
//! (compiler_builtins) as needed, everything but the exports internalized and dead code dropped
//! (so the rewrite sees only what the kernels use), the `offload-spirv` pass (address spaces,
//! kernel signatures, markers; `rewrite.cpp`), LLVM's O3 pipeline for the SPIR-V target followed
//! by the plugin's `offload-spirv-mul-overflow` (multiplies with overflow as OpenCL's `mul_hi`,
//! also those O3 formed), and `llc` to a SPIR-V 1.4 binary (what OpenCL 3.0 devices take through
//! `clCreateProgramWithIL`).

use crate::link_script::{head, path_str, LINK_OBJECTS};
use crate::sh_quote::sh_quote;
use std::path::Path;

/// The SPIR-V version and addressing the images use.
pub(crate) const SPIRV_TRIPLE: &str = "spirv64v1.4-unknown-unknown";

/// The script's text, with the tools and the pass plugin's absolute paths baked in.
pub(crate) fn render(llvm_link: &Path, opt: &Path, llc: &Path, pass_plugin: &Path) -> String {
    let mut s = head(llvm_link, opt, llc);
    s.push_str(&format!(
        "PASS_PLUGIN={}\nSPIRV_TRIPLE={SPIRV_TRIPLE}\n",
        sh_quote(path_str(pass_plugin))
    ));
    s.push_str(LINK_OBJECTS);
    s.push_str(SPIRV_TAIL);
    s
}

const SPIRV_TAIL: &str = r#"
set -- "$work"/lib*.a
if [ -e "$1" ]; then
    "$LLVM_LINK" --ignore-non-bitcode --only-needed "$work/objects.bc" "$@" -o "$work/linked.bc" \
        || fail "llvm-link of libraries failed"
else
    mv "$work/objects.bc" "$work/linked.bc"
fi
"$OPT" "--internalize-public-api-list=$exports" "-passes=internalize,globaldce" \
    "$work/linked.bc" -o "$work/internal.bc" || fail "opt (internalize) failed"
"$OPT" "-load-pass-plugin=$PASS_PLUGIN" -passes=offload-spirv "$work/internal.bc" \
    -o "$work/spirv.bc" || fail "the offload-spirv pass failed"
"$OPT" "-load-pass-plugin=$PASS_PLUGIN" "-passes=default<O$olevel>,offload-spirv-mul-overflow" \
    "$work/spirv.bc" -o "$work/opt.bc" || fail "opt failed"
"$LLC" "-mtriple=$SPIRV_TRIPLE" "-O$llc_olevel" -filetype=obj "$work/opt.bc" -o "$out" \
    || fail "llc (SPIR-V) failed"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the script with stand-in tools that record their arguments.
    #[cfg(unix)]
    #[test]
    fn pipeline_order() {
        let tools = crate::fake_tools::FakeTools::new("offload-spirv-link");
        let dir = &tools.dir;
        let plugin = Path::new("/cache/offload_spirv.so");
        let script = tools.executable(
            "offload-link-spirv",
            &render(
                &tools.tool("link"),
                &tools.tool("opt"),
                &tools.tool("llc"),
                plugin,
            ),
        );
        let obj = dir.join("k.rcgu.o");
        std::fs::write(&obj, b"").unwrap();
        let out = dir.join("k.ptx");
        let status = std::process::Command::new(&script)
            .env("TMPDIR", "/tmp")
            .args(["--export-symbol", "saxpy"])
            .arg(&obj)
            .args([
                "--target",
                "nvptx64-nvidia-cuda",
                "--target-cpu",
                "sm_90",
                "-o",
            ])
            .arg(&out)
            .arg("-O3")
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(
            tools.calls(),
            [
                "link W/obj1001.o -o W/objects.bc",
                "opt --internalize-public-api-list=OFFLOAD_PANIC_RECORD,OFFLOAD_PANIC_FLAG_PTR,saxpy -passes=internalize,globaldce W/linked.bc -o W/internal.bc",
                "opt -load-pass-plugin=/cache/offload_spirv.so -passes=offload-spirv W/internal.bc -o W/spirv.bc",
                "opt -load-pass-plugin=/cache/offload_spirv.so -passes=default<O3>,offload-spirv-mul-overflow W/spirv.bc -o W/opt.bc",
                &format!("llc -mtriple=spirv64v1.4-unknown-unknown -O3 -filetype=obj W/opt.bc -o {}", out.display()),
            ]
        );
    }
}
