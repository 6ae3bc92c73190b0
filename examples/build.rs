include!("kernels_build.rs");

fn main() {
    example_kernels("src/kernels.rs").build();
}
