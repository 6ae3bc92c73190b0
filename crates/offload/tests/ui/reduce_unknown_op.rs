include!("shared/no_images.rs");

// `avg` is no reduction: the error lists the operations there are.
#[offload::kernel]
pub fn mean(x: &[f64], #[reduce(avg)] total: &mut f64) {
    for i in offload::grid_stride(x.len()) {
        *total += x[i];
    }
}

fn main() {}
