//! `ldmatrix`: the warp loads four 8 × 8 blocks of 16-bit values (or 8 × 4 of 32-bit ones) from
//! shared memory. Lane `l` names the 16 bytes of row `l % 8` of block `l / 8`; lane `l` receives,
//! in register `i`, the two values at row `l / 4`, columns `2 * (l % 4)` and `+ 1` of block `i`
//! (with `TRANS`, those of the transposed block: rows `2 * (l % 4)` and `+ 1`, column `l / 4`).

use super::require_tensor_cores;
use crate::SharedSlice;
use core::mem::size_of;

/// Bytes of one row of an 8 × 8 block of 16-bit values.
const ROW_BYTES: usize = 16;

/// The four registers `ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16` gives this lane, when
/// this lane names the row that starts at element `offset` of `tile`.
///
/// # Safety
/// All 32 lanes of the warp call this together, and no thread writes the rows they name between
/// the block barriers around the call.
///
/// # Panics
/// If the row is not inside `tile` or does not start at a 16-byte boundary.
#[inline(always)]
#[track_caller]
pub(super) unsafe fn x4<T: Copy, const TRANS: bool>(
    tile: SharedSlice<T>,
    offset: usize,
) -> [u32; 4] {
    require_tensor_cores::<T>();
    let base = tile.as_ptr() as *const u8;
    let bytes = offset.wrapping_mul(size_of::<T>());
    // Written so that the parts that do not depend on `offset` (the tile's length and alignment)
    // can be checked once outside a kernel's loops: one comparison per call remains.
    let last = tile.len().wrapping_sub(ROW_BYTES / size_of::<T>());
    assert!(
        tile.len() >= ROW_BYTES / size_of::<T>()
            && base as usize % ROW_BYTES == 0
            && offset <= last
            && bytes % ROW_BYTES == 0,
        "ldmatrix: a row outside the shared tile, or not 16-byte aligned"
    );
    // SAFETY: the row is inside the tile and aligned (checked); the caller's contract covers
    // the rest.
    unsafe { arch::x4::<TRANS>(base, bytes) }
}

/// [`x4`] without its checks, for loops whose rows were checked once per tile: on the GPU no
/// comparison and no branch remains between the loads and the `mma`s (the host backend still
/// checks, so a kernel's tests catch a wrong offset).
///
/// # Safety
/// As for [`x4`]; moreover the row (16 bytes from element `offset`) lies inside `tile`, and
/// `tile` and the row start at 16-byte boundaries.
#[inline(always)]
#[track_caller]
pub(super) unsafe fn x4_unchecked<T: Copy, const TRANS: bool>(
    tile: SharedSlice<T>,
    offset: usize,
) -> [u32; 4] {
    if cfg!(not(any(target_arch = "nvptx64", target_arch = "amdgpu"))) {
        // SAFETY: the caller's contract.
        return unsafe { x4::<T, TRANS>(tile, offset) };
    }
    require_tensor_cores::<T>();
    // SAFETY: the caller's contract.
    unsafe { arch::x4::<TRANS>(tile.as_ptr() as *const u8, offset * size_of::<T>()) }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod arch {
    use super::super::ptx;

    /// The row `bytes` past the start of the tile at `base`.
    #[inline(always)]
    pub(super) unsafe fn x4<const TRANS: bool>(base: *const u8, bytes: usize) -> [u32; 4] {
        // The tile's address is converted once (the conversion is pure, so the compiler hoists
        // it out of loops); rows are 32-bit offsets from it.
        let address = crate::shared_window::shared_address(base).wrapping_add(bytes as u32);
        // SAFETY: the caller's contract (a 16-byte row of shared memory, the whole warp).
        unsafe {
            if TRANS {
                ptx::ldmatrix_x4_trans(address)
            } else {
                ptx::ldmatrix_x4(address)
            }
        }
    }
}

#[cfg(any(
    target_arch = "amdgpu",
    all(target_arch = "nvptx64", feature = "spirv")
))]
mod arch {
    #[inline(always)]
    pub(super) unsafe fn x4<const TRANS: bool>(_: *const u8, _: usize) -> [u32; 4] {
        unreachable!("require_tensor_cores panicked before")
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::super::host;

    pub(super) unsafe fn x4<const TRANS: bool>(base: *const u8, bytes: usize) -> [u32; 4] {
        let row = base.wrapping_add(bytes);
        let rows = host::warp_gather([row.expose_provenance() as u64], "ldmatrix");
        let lane = crate::lane_id() as usize;
        // Value `col` (16-bit) of the row named by lane `from`.
        let value = |from: usize, col: usize| -> u32 {
            let start: *const u16 = core::ptr::with_exposed_provenance(rows[from][0] as usize);
            // SAFETY: lane `from` checked that its 16-byte row lies in its shared tile, which
            // lives as long as the block; col < 8.
            unsafe { start.add(col).read() as u32 }
        };
        core::array::from_fn(|i| {
            let (lo, hi) = if TRANS {
                let k = 2 * (lane % 4);
                (value(8 * i + k, lane / 4), value(8 * i + k + 1, lane / 4))
            } else {
                let r = 8 * i + lane / 4;
                (value(r, 2 * (lane % 4)), value(r, 2 * (lane % 4) + 1))
            };
            lo | hi << 16
        })
    }
}
