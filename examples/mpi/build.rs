fn main() {
    offload_build::Kernels::new("src/kernels.rs").build();
}
