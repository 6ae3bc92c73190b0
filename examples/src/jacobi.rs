//! Jacobi iteration for Laplace's equation on a 2D grid, three ways: on the CPU, launching the
//! kernel per sweep with plain arguments (the grids cross the bus every sweep), and inside one
//! data region (they cross it once each way). The demo, the tests and the mapping benchmark use
//! these.

use crate::{kernels, reference};
use offload::{from, Device, Launch};

/// A `width × height` grid, the top edge held at 1.0, every other point 0.0.
pub fn initial_grid(width: u32, height: u32) -> Vec<f32> {
    let mut grid = vec![0.0; (width * height) as usize];
    grid[..width as usize].fill(1.0);
    grid
}

/// How many two-sweep steps make `sweeps`, which must be even: the sweeps alternate between two
/// grids, so that the result ends in the caller's.
fn sweep_pairs(sweeps: usize) -> usize {
    assert!(
        sweeps.is_multiple_of(2),
        "sweeps alternate between two grids"
    );
    sweeps / 2
}

/// `sweeps` (even) sweeps over `grid` with plain CPU loops.
pub fn on_cpu(width: u32, height: u32, grid: &mut [f32], sweeps: usize) {
    let pairs = sweep_pairs(sweeps);
    let mut next = grid.to_vec();
    for _ in 0..pairs {
        reference::jacobi2d(width, height, grid, &mut next);
        reference::jacobi2d(width, height, &next, grid);
    }
}

/// `sweeps` (even) sweeps on `device`, one plain launch each: every sweep copies its input grid
/// to the device and its output back (`from`: outputs are not copied in).
pub fn per_launch(
    device: &Device,
    width: u32,
    height: u32,
    grid: &mut [f32],
    sweeps: usize,
) -> offload::Result<()> {
    let pairs = sweep_pairs(sweeps);
    let mut next = grid.to_vec();
    for _ in 0..pairs {
        kernels::jacobi2d::launch(Launch::on(device), width, height, &*grid, from(&mut next))?;
        kernels::jacobi2d::launch(Launch::on(device), width, height, &next, from(&mut *grid))?;
    }
    Ok(())
}

/// `sweeps` (even) sweeps on `device` inside one data region: `grid` is copied in once and back
/// once, the second grid is device scratch.
pub fn in_region(
    device: &Device,
    width: u32,
    height: u32,
    grid: &mut [f32],
    sweeps: usize,
) -> offload::Result<()> {
    let pairs = sweep_pairs(sweeps);
    let mut scratch = vec![0.0f32; grid.len()];
    offload::region_on(device, |r| {
        let mut a = r.tofrom(&mut *grid)?;
        let mut b = r.alloc(&mut scratch)?;
        for _ in 0..pairs {
            kernels::jacobi2d::launch(Launch::on(device), width, height, &a, &mut b)?;
            kernels::jacobi2d::launch(Launch::on(device), width, height, &b, &mut a)?;
        }
        Ok(())
    })
}
