#[derive(Clone, Copy, offload::DeviceCopy)]
struct Params {
    scale: f32,
}

fn main() {}
