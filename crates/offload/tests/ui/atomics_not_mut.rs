include!("shared/no_images.rs");

// Atomics are shared by every thread: a `&mut [Atomic<T>]` parameter is refused.
#[offload::kernel]
pub fn count(bins: &mut [offload::Atomic<u32>]) {
    bins.len();
}

fn main() {}
