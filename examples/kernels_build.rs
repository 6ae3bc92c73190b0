// The device pass of offload-examples' kernels module, shared by the build scripts that compile
// it: offload-examples' own and examples/unreported's (the same kernels, panic reporting off).
// `kernels_file` is relative to the including package.
fn example_kernels(kernels_file: &str) -> offload_build::Kernels {
    offload_build::Kernels::new(kernels_file)
        // A no_std crate from crates.io that the kernels use, compiled into the device image.
        .dependency(
            "num-traits",
            r#"{ version = "0.2", default-features = false }"#,
        )
}
