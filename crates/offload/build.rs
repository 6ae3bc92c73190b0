fn main() {
    // Read by the device pass (offload-build) in dependent crates' build scripts as DEP_OFFLOAD_ROOT.
    println!(
        "cargo::metadata=root={}",
        std::env::var("CARGO_MANIFEST_DIR").unwrap()
    );
    println!("cargo::rerun-if-changed=build.rs");
}
