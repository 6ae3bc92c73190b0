// The device pass of offload-examples' kernels module.
fn main() {
    offload_build::Kernels::new("src/kernels.rs")
        // A no_std crate from crates.io that the kernels use, compiled into the device image.
        .dependency(
            "num-traits",
            r#"{ version = "0.2", default-features = false }"#,
        )
        .build();
}
