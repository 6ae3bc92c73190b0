//! Warpgroup tensor cores (PTX `wgmma.mma_async`, sm_90a): a *warpgroup*, 4 consecutive warps
//! (128 threads, starting at a warp index divisible by 4), multiplies a 64 × 256 × 16 product
//! `D += A · Bᵀ` in one instruction, with both operands read from shared memory by the tensor
//! cores and the accumulators in registers (64 × 256 `f32`, 128 per thread: [`Acc64x256`]).
//!
//! Operands are K-major `bf16` tiles in shared memory laid out as the bulk tensor copy
//! ([`crate::tensor_copy`]) writes them with its 128-byte swizzle ([`SwizzledTile`]): rows of
//! 64 elements (128 bytes) in which 16-byte chunk `c` of row `r` sits at chunk `c ^ (r % 8)`,
//! starting at a 1024-byte boundary. A GEMM's `A` (`m × k`, row-major) and weight matrix `W`
//! (`n × k`, row-major, as `torch.nn.Linear` holds it) are both K-major.
//!
//! A k step of 64 is [`mma_async_k64`]: a fence, four instructions, a commit; [`wait`] then
//! waits until at most `N` committed steps are still running.
//!
//! # Taking part, and what is unsafe
//! The operations are collective over the warpgroup: all 128 threads call them together. The
//! tensor cores read the operands *after* the call returns, until a [`wait`] covering it: no
//! thread may write those tiles meanwhile; that is the `unsafe` contract of [`mma_async_k64`].
//! The accumulators may be read any time (`ptxas` makes a thread wait for the operations that
//! write the registers it reads), but read them after [`wait`] or the wait is wherever the
//! compiler put it.
//!
//! # Host backend
//! Each thread computes its own accumulators when it issues the operation, from the shared
//! memory as it is then (the contract above makes that the same), in the documented order of
//! [`super`]'s host backend (`d = fma(a_k, b_k, d)` for `k` ascending). GPU results differ by
//! the accumulation order, within the bound that module documents (`K` = 16 per instruction).
//!
//! # Architectures
//! `wgmma` exists on sm_90a only (not sm_90, nor later GPUs). In an image for another target,
//! NVIDIA (`sm_90` included), AMD or SPIR-V, the operations panic when they run: the launch
//! fails (`Error::KernelFailed`) with a message saying to build for sm_90a
//! (`OFFLOAD_CUDA_ARCH=sm_90a` or `Kernels::cuda_arch("sm_90a")`), and the module's other
//! kernels still build and run there.

use crate::SharedSlice;
use half::bf16;

/// Threads of a warpgroup.
pub const WARPGROUP_THREADS: u32 = 128;

/// Elements in a row of a [`SwizzledTile`] (128 bytes of `bf16`).
pub const SWIZZLE_ROW: usize = 64;

/// Byte alignment of a [`SwizzledTile`]: the swizzle follows address bits 4 to 9.
pub const SWIZZLE_ALIGN: usize = 1024;

/// The 64 × 256 `f32` accumulators of a warpgroup's tile, 128 in each thread (at
/// [`Acc64x256::position`]).
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct Acc64x256(pub [f32; 128]);

impl Acc64x256 {
    /// All zeros.
    pub const ZERO: Acc64x256 = Acc64x256([0.0; 128]);

    /// Row and column of accumulator `i` of the calling thread (`thread` is its index in the
    /// warpgroup, `0..128`): warp `w` of the group holds rows `16 w ..`, and each 8 columns
    /// repeat the layout of `mma`'s 16 × 8 accumulators.
    #[inline(always)]
    pub fn position(thread: usize, i: usize) -> (usize, usize) {
        let (warp, lane) = (thread / 32, thread % 32);
        let row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1);
        let col = 8 * (i >> 2) + 2 * (lane % 4) + (i & 1);
        (row, col)
    }
}

/// A K-major `bf16` operand tile in shared memory: `rows` rows of [`SWIZZLE_ROW`] elements,
/// 128-byte swizzled (see the module docs), at a [`SWIZZLE_ALIGN`]-byte boundary.
#[derive(Clone, Copy)]
pub struct SwizzledTile {
    base: *const bf16,
    rows: usize,
}

impl SwizzledTile {
    /// The tile of `rows` rows at element `offset` of `smem`.
    ///
    /// # Panics
    /// If it does not fit in `smem`, or does not start at a 1024-byte boundary.
    #[inline(always)]
    #[track_caller]
    pub fn new(smem: SharedSlice<bf16>, offset: usize, rows: usize) -> SwizzledTile {
        let base = smem.as_ptr().wrapping_add(offset) as *const bf16;
        assert!(
            offset + rows * SWIZZLE_ROW <= smem.len() && base as usize % SWIZZLE_ALIGN == 0,
            "SwizzledTile: a tile outside its slice, or not at a 1024-byte boundary"
        );
        SwizzledTile { base, rows }
    }

    /// Element offset, from the tile's start, of element `(row, col)` (`col < 64`).
    #[inline(always)]
    pub fn offset_of(row: usize, col: usize) -> usize {
        row * SWIZZLE_ROW + (((col / 8) ^ (row % 8)) * 8) + col % 8
    }

    /// Rows of the tile.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The tile's rows from `first` on.
    ///
    /// # Panics
    /// If `first` is not a multiple of 8 (the swizzle's period) or past the end.
    #[inline(always)]
    #[track_caller]
    pub fn rows_from(self, first: usize) -> SwizzledTile {
        assert!(
            first % 8 == 0 && first <= self.rows,
            "SwizzledTile::rows_from: a multiple of 8 inside the tile"
        );
        SwizzledTile {
            base: self.base.wrapping_add(first * SWIZZLE_ROW),
            rows: self.rows - first,
        }
    }
}

/// `acc += A · Bᵀ` over the 64 columns of `a`'s first 64 rows and `b`'s first 256 rows, issued
/// as four `m64n256k16` instructions after a `wgmma.fence`, and committed as one group. Returns
/// before the tensor cores have finished: see [`wait`].
///
/// # Safety
/// The whole warpgroup calls it together (threads `128 g .. 128 g + 128` of a block whose size is
/// a multiple of 128); no thread writes the rows of `a` and `b` it reads until each of them has
/// returned from a [`wait`] that covers this group.
///
/// # Panics
/// If `a` has fewer than 64 rows or `b` fewer than 256; where there is no `wgmma` (see the
/// module docs).
#[inline(always)]
#[track_caller]
pub unsafe fn mma_async_k64(acc: &mut Acc64x256, a: SwizzledTile, b: SwizzledTile) {
    assert!(
        a.rows >= 64 && b.rows >= 256,
        "mma_async_k64: A needs 64 rows, B 256"
    );
    // SAFETY: the caller's contract.
    unsafe { arch::mma_k64(acc, a, b) }
}

/// Waits until at most `PENDING` of the warpgroup's committed [`mma_async_k64`] groups are
/// unfinished: afterwards the others' accumulators are final and their tiles may be refilled.
#[inline(always)]
pub fn wait<const PENDING: u32>() {
    arch::wait::<PENDING>();
}

#[cfg(all(
    target_arch = "nvptx64",
    target_feature = "sm_90a",
    not(feature = "spirv")
))]
mod arch {
    use super::{Acc64x256, SwizzledTile};

    /// The matrix descriptor of a 128-byte-swizzled K-major tile starting at shared address
    /// `address`: start address / 16 in bits 0–13, the stride between 8-row groups (1024 bytes)
    /// / 16 in bits 32–45, the leading offset (unused by this layout) 1, swizzle mode 1 (128 B)
    /// in bits 62–63.
    #[inline(always)]
    fn descriptor(address: u32) -> u64 {
        ((address as u64 >> 4) & 0x3fff) | (1 << 16) | ((1024u64 >> 4) << 32) | (1 << 62)
    }

    #[inline(always)]
    pub(super) unsafe fn mma_k64(acc: &mut Acc64x256, a: SwizzledTile, b: SwizzledTile) {
        let a0 = crate::shared_window::shared_address(a.base as *const u8);
        let b0 = crate::shared_window::shared_address(b.base as *const u8);
        // SAFETY: registers only; orders this warpgroup's earlier register and shared-memory
        // accesses before the tensor cores' (PTX `wgmma.fence`).
        unsafe { core::arch::asm!("wgmma.fence.sync.aligned;", options(nostack)) };
        // Step `s` is the 16 columns at byte 32 s of every row: the hardware applies the
        // swizzle to the advanced address. Written out, so that the accumulators stay in
        // registers whatever the compiler's unrolling limits.
        let step = |acc: &mut Acc64x256, s: u32| {
            let (da, db) = (descriptor(a0 + 32 * s), descriptor(b0 + 32 * s));
            // SAFETY: the caller's contract.
            unsafe { super::super::wgmma_ptx::m64n256k16_bf16(&mut acc.0, da, db) };
        };
        step(acc, 0);
        step(acc, 1);
        step(acc, 2);
        step(acc, 3);
        // SAFETY: no operands; closes the four instructions into one group.
        unsafe { core::arch::asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
    }

    #[inline(always)]
    pub(super) fn wait<const PENDING: u32>() {
        // SAFETY: waits for the tensor cores; memory is not declared untouched, so accesses to
        // the tiles stay after it.
        unsafe {
            core::arch::asm!("wgmma.wait_group.sync.aligned {n};", n = const PENDING, options(nostack))
        };
    }
}

#[cfg(any(
    target_arch = "amdgpu",
    all(
        target_arch = "nvptx64",
        any(feature = "spirv", not(target_feature = "sm_90a"))
    )
))]
mod arch {
    use super::{Acc64x256, SwizzledTile};

    const MISSING: &str = "offload::mma::wgmma needs an NVIDIA sm_90a image (H100, H200): build \
                           the kernels for sm_90a (OFFLOAD_CUDA_ARCH=sm_90a or \
                           Kernels::cuda_arch(\"sm_90a\"))";

    pub(super) unsafe fn mma_k64(_: &mut Acc64x256, _: SwizzledTile, _: SwizzledTile) {
        panic!("{}", MISSING)
    }

    pub(super) fn wait<const PENDING: u32>() {
        panic!("{}", MISSING)
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::{Acc64x256, SwizzledTile, WARPGROUP_THREADS};
    use crate::index::{block_dim, thread_idx};

    /// Each thread's own accumulators, from the tiles as they are now, in `k` order.
    pub(super) unsafe fn mma_k64(acc: &mut Acc64x256, a: SwizzledTile, b: SwizzledTile) {
        assert!(
            block_dim().count() % WARPGROUP_THREADS as u64 == 0,
            "mma_async_k64: blocks of a multiple of 128 threads (whole warpgroups)"
        );
        let thread = thread_idx().linear_in(block_dim()) % WARPGROUP_THREADS as usize;
        let at = |t: &SwizzledTile, row: usize, col: usize| {
            // SAFETY: row < t.rows (64 or 256, checked by the caller) and col < 64: inside the
            // tile, which `SwizzledTile::new` checked lies in shared memory.
            unsafe { (*t.base.add(SwizzledTile::offset_of(row, col))).to_f32() }
        };
        for (i, d) in acc.0.iter_mut().enumerate() {
            let (row, col) = Acc64x256::position(thread, i);
            *d = super::super::host::dot_f32(*d, (0..64).map(|k| (at(&a, row, k), at(&b, col, k))));
        }
    }

    pub(super) fn wait<const PENDING: u32>() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_cover_the_tile_once() {
        let mut seen = [[false; 256]; 64];
        for t in 0..128 {
            for i in 0..128 {
                let (r, c) = Acc64x256::position(t, i);
                assert!(!seen[r][c], "({r}, {c}) twice");
                seen[r][c] = true;
            }
        }
        // Thread 5 (lane 5 of warp 0): group 1, index 1 — rows 1 and 9, columns 2, 3, 10, ...
        assert_eq!(Acc64x256::position(5, 0), (1, 2));
        assert_eq!(Acc64x256::position(5, 3), (9, 3));
        assert_eq!(Acc64x256::position(5, 4), (1, 10));
        assert_eq!(Acc64x256::position(32, 0), (16, 0));
    }

    #[test]
    fn swizzle_permutes_chunks_within_rows() {
        for r in 0..16 {
            let mut chunks: [usize; 8] =
                core::array::from_fn(|c| SwizzledTile::offset_of(r, 8 * c));
            chunks.sort();
            assert_eq!(chunks, core::array::from_fn(|c| r * 64 + 8 * c));
        }
        assert_eq!(SwizzledTile::offset_of(3, 9), 3 * 64 + (1 ^ 3) * 8 + 1);
    }
}
