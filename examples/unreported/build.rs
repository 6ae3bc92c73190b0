fn main() {
    // The very kernels of offload-examples (see its build.rs), with panic reporting off.
    offload_build::Kernels::new("../src/kernels.rs")
        .dependency(
            "num-traits",
            r#"{ version = "0.2", default-features = false }"#,
        )
        .panic_reporting(false)
        .build();
}
