include!("shared/no_images.rs");

#[offload::kernel]
fn sum(x: &[f32]) -> f32 {
    x[0]
}

fn main() {}
