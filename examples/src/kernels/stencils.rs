//! Stencils written with `#[grid(..)]` outputs (`GridOut2`/`GridOut3::stencil`): each thread walks
//! a column of 16-byte chunks with the neighbouring rows in registers, so each input point is read
//! from memory about once, 16 bytes per load. The results equal the plain loops' bit for bit.
use super::Grid2 as Params2;
use offload::prelude::*;

/// `stencil5` (a Jacobi-style sweep of a 5-point stencil, border points copied) with the grid
/// API.
#[offload::kernel]
pub fn stencil5_tiles(
    grid: Params2,
    input: &[f32],
    #[grid(grid.width, grid.height)] output: &mut [f32],
) {
    let side = (1.0 - grid.centre) * 0.25;
    let nx = grid.width as usize;
    let input = Grid2::new(input, grid.width, grid.height);
    output.stencil(
        &input,
        |p| grid.centre * p.at(0, 0) + side * (p.at(-1, 0) + p.at(1, 0) + p.at(0, -1) + p.at(0, 1)),
        |x, y| input.get(y * nx + x),
    );
}

/// `stencil5_tiles` with each border point read from the row below it: the bounds check of the
/// border closure fails on the last row, after the launch has written other points, which a
/// failed launch must put back (examples/tests/stencils.rs).
#[offload::kernel]
pub fn stencil5_tiles_past_the_end(
    grid: Params2,
    input: &[f32],
    #[grid(grid.width, grid.height)] output: &mut [f32],
) {
    let nx = grid.width as usize;
    let input = Grid2::new(input, grid.width, grid.height);
    output.stencil(&input, |p| p.at(0, 0), |x, y| input.get((y + 1) * nx + x));
}

/// Parameters of the 3D stencil, passed by value.
#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Params3 {
    pub nx: u32,
    pub ny: u32,
    pub nz: u32,
    /// Weight of the centre point; the six neighbours share the rest.
    pub centre: f32,
}

/// A 7-point 3D stencil over an `nx × ny × nz` grid (x fastest), border points copied, with the
/// grid API.
#[offload::kernel]
pub fn stencil7_tiles(
    grid: Params3,
    input: &[f32],
    #[grid(grid.nx, grid.ny, grid.nz)] output: &mut [f32],
) {
    let side = (1.0 - grid.centre) / 6.0;
    let (nx, ny) = (grid.nx as usize, grid.ny as usize);
    let input = Grid3::new(input, grid.nx, grid.ny, grid.nz);
    output.stencil(
        &input,
        |p| {
            grid.centre * p.at(0, 0, 0)
                + side
                    * (p.at(-1, 0, 0)
                        + p.at(1, 0, 0)
                        + p.at(0, -1, 0)
                        + p.at(0, 1, 0)
                        + p.at(0, 0, -1)
                        + p.at(0, 0, 1))
        },
        |x, y, z| input.get((z * ny + y) * nx + x),
    );
}
