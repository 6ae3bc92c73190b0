include!("shared/no_images.rs");

// `sum` reduces numbers: a bool has no sum, and the error says how to reduce another type.
#[offload::kernel]
pub fn any(x: &[bool], #[reduce(sum)] found: &mut bool) {
    for i in offload::grid_stride(x.len()) {
        *found |= x[i];
    }
}

fn main() {}
