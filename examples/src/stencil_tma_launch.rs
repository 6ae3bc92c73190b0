//! Launching `kernels::stencil_tma::stencil7_tma` without `unsafe`: the tensor map is made here
//! from the same mapped input that the launch passes, so it describes that memory on the
//! launch's device (the launch refuses an input resident on another device).
use crate::kernels::stencil_tma::{
    stencil7_tma, stencil_tma_items, stencil_tma_layout, stencil_tma_shared_bytes,
    stencil_tma_threads, TmaMarch,
};
use crate::kernels::stencils::Params3;
use offload::map::OutArg;
use offload::{Device, Error, Launch, Mapped};

/// A tile shape of `stencil7_tma`: `tx × ty` points, `cpt` 16-byte chunks per thread (one of
/// the kernel's instances: `tx` 64 or 128, `ty` 16 or 32, `cpt` 2 or 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaTile {
    pub tx: usize,
    pub ty: usize,
    pub cpt: usize,
}

impl TmaTile {
    /// `tx × ty` points, `cpt` chunks per thread.
    pub const fn new(tx: usize, ty: usize, cpt: usize) -> TmaTile {
        TmaTile { tx, ty, cpt }
    }
}

/// `stencil7_tma` with tiles of `tile` of `input` (a region's mapping on `device`) into
/// `output`, marching as `march` says, on `blocks` blocks (default: one per work item).
///
/// # Errors
/// `InvalidArgument` for a tile shape without an instance; the tensor map's
/// (`Device::tensor_map_2d`: `nx` not a multiple of 4, say); the launch's (`KernelFailed`
/// where the image has no bulk tensor copies).
pub fn stencil7_tma_on(
    device: &Device,
    (tile, march, blocks): (TmaTile, TmaMarch, Option<u32>),
    grid: Params3,
    input: &Mapped<'_, f32>,
    output: impl OutArg<f32>,
) -> offload::Result<()> {
    let TmaTile { tx, ty, cpt } = tile;
    let map = device.tensor_map_2d(input.device_ptr(), &stencil_tma_layout(grid, tx, ty))?;
    let items = stencil_tma_items(grid, tx, ty, march.planes);
    let launch = Launch::on(device)
        .grid(blocks.unwrap_or(items).max(1))
        .block(stencil_tma_threads(tx, ty, cpt))
        .dynamic_shared(stencil_tma_shared_bytes(tx, ty, march.ring));
    let maps = [map];
    macro_rules! instances {
        ($(($x:literal, $y:literal, $c:literal)),*) => {
            match (tx, ty, cpt) {
                $(
                    // SAFETY: the map describes `input`'s memory on `device` with this
                    // instance's layout, and the launch runs on `device` with that same `input`
                    // (resident there, else the launch fails).
                    ($x, $y, $c) => unsafe {
                        stencil7_tma::launch::<$x, $y, $c>(launch, grid, march, &maps, input, output)
                    },
                )*
                _ => Err(Error::InvalidArgument {
                    kernel: "stencil7_tma",
                    argument: "tile",
                    reason: format!("no instance for {tile:?}"),
                }),
            }
        };
    }
    instances!(
        (64, 16, 2),
        (64, 16, 4),
        (64, 32, 2),
        (64, 32, 4),
        (128, 16, 2),
        (128, 16, 4),
        (128, 32, 2),
        (128, 32, 4)
    )
}
