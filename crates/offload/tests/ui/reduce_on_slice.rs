include!("shared/no_images.rs");

// A reduction's parameter is the thread's accumulator, one value: not a slice.
#[offload::kernel]
pub fn sums(x: &[f64], #[reduce(sum)] totals: &mut [f64]) {
    let _ = (x, totals);
}

fn main() {}
