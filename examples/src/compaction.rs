//! Stream compaction on the device: the indices of the elements that pass a test, in order,
//! through the exclusive scan of their 0/1 flags (`kernels::scans`).

use crate::kernels::scans::{self, scan_sum_u32};
use offload::scan::Scan;
use offload::{DeviceVec, Launch};

/// The indices `i` of `x` with `x[i] > threshold`, in increasing order, in a `DeviceVec` on
/// `x`'s device: flags, their exclusive sum scan (`scan`: which scan shape; it must be
/// exclusive), then each output element's index by a binary search of the scan. Reads back
/// two elements (the last flag and position) to size the output.
pub fn indices_above(
    scan: Scan,
    threshold: f32,
    x: &DeviceVec<f32>,
) -> offload::Result<DeviceVec<u32>> {
    assert!(!scan.is_inclusive(), "compaction takes the exclusive scan");
    let device = x.device().clone();
    let n = x.len();
    if n == 0 {
        return DeviceVec::zeroed(&device, 0);
    }
    let mut flags = DeviceVec::<u32>::zeroed(&device, n)?;
    scans::flag_above::launch(Launch::on(&device), threshold, x, &mut flags)?;
    let mut positions = DeviceVec::<u32>::zeroed(&device, n)?;
    scan_sum_u32::run(scan, &flags, &mut positions)?;
    let (mut last_flag, mut last_position) = ([0u32], [0u32]);
    flags.copy_to_host_at(n - 1, &mut last_flag)?;
    positions.copy_to_host_at(n - 1, &mut last_position)?;
    let count = (last_flag[0] + last_position[0]) as usize;
    let mut out = DeviceVec::<u32>::zeroed(&device, count)?;
    if count > 0 {
        scans::gather_flagged::launch(Launch::on(&device), &positions, &mut out)?;
    }
    Ok(out)
}
