#[derive(Clone, Copy, offload::DeviceCopy)]
#[repr(C)]
struct Params {
    data: &'static [f32],
}

fn main() {}
