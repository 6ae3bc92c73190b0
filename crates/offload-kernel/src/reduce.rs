//! Reductions as kernel parameters: `#[reduce(sum)] total: &mut f64` (also `product`, `min`,
//! `max`, or `#[reduce]` for a type implementing [`Reduce`]).
//!
//! In the kernel body the parameter is the thread's own accumulator, starting at the operation's
//! identity. When the body returns, offload combines the accumulators in a fixed order, with no
//! floating-point atomics ([`combine_launch`]), and folds the launch's total into the caller's
//! value: `*target = op(*target, total)`. The order depends on the launch shape alone (block size
//! and grid), not on the warp width or on timing, so the result is the same bits from run to run,
//! and on the host backend and a GPU for the same shape.
//!
//! Integer sums and products wrap on overflow (as the GPU's integer adds do). `min` and `max` of
//! floats ignore NaN operands (IEEE 754 `minNum`/`maxNum`, as `f32::min`): NaN only if every value
//! is NaN.

use crate::{block_dim, block_idx, grid_dim, sync_threads, thread_idx, DeviceCopy};
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// A value with its own reduction: an identity and an associative combine. For a reduction of
/// a user type, as `#[reduce] best: &mut MinLoc`.
///
/// `combine` must be associative and commutative: offload combines the values in an order fixed
/// by the launch shape, which is not the order of the elements (a minimum with its index, say,
/// breaks ties by the lower index to be so).
pub trait Reduce: DeviceCopy {
    /// The value that changes nothing: `combine(identity(), x) == x`.
    fn identity() -> Self;
    /// The two values as one.
    fn combine(self, other: Self) -> Self;
}

/// A reduction operation over `T`: what `#[reduce(op)]` names.
#[diagnostic::on_unimplemented(
    message = "the reduction `{Self}` does not reduce `{T}`",
    label = "not a reduction of `{T}`",
    note = "sum, product, min and max take the primitive integers and floats; for another type, \
            implement `offload::Reduce` for it and write `#[reduce]` with no operation"
)]
pub trait ReduceOp<T> {
    /// The value that changes nothing.
    fn identity() -> T;
    /// The two values as one.
    fn combine(a: T, b: T) -> T;
}

/// `#[reduce(sum)]`: `+`, wrapping for integers.
pub struct Sum;
/// `#[reduce(product)]`: `*`, wrapping for integers.
pub struct Product;
/// `#[reduce(min)]`: the least value; floats ignore NaN.
pub struct Min;
/// `#[reduce(max)]`: the greatest value; floats ignore NaN.
pub struct Max;
/// `#[reduce]`: the type's own [`Reduce`].
pub struct Own;

impl<T: Reduce> ReduceOp<T> for Own {
    #[inline(always)]
    fn identity() -> T {
        T::identity()
    }
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        a.combine(b)
    }
}

macro_rules! integer_ops {
    ($($t:ty),*) => {$(
        impl ReduceOp<$t> for Sum {
            #[inline(always)]
            fn identity() -> $t { 0 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.wrapping_add(b) }
        }
        impl ReduceOp<$t> for Product {
            #[inline(always)]
            fn identity() -> $t { 1 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.wrapping_mul(b) }
        }
        impl ReduceOp<$t> for Min {
            #[inline(always)]
            fn identity() -> $t { <$t>::MAX }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { if b < a { b } else { a } }
        }
        impl ReduceOp<$t> for Max {
            #[inline(always)]
            fn identity() -> $t { <$t>::MIN }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { if b > a { b } else { a } }
        }
    )*};
}
integer_ops!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

macro_rules! float_ops {
    ($($t:ty),*) => {$(
        impl ReduceOp<$t> for Sum {
            #[inline(always)]
            fn identity() -> $t { 0.0 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a + b }
        }
        impl ReduceOp<$t> for Product {
            #[inline(always)]
            fn identity() -> $t { 1.0 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a * b }
        }
        impl ReduceOp<$t> for Min {
            #[inline(always)]
            fn identity() -> $t { <$t>::INFINITY }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.min(b) }
        }
        impl ReduceOp<$t> for Max {
            #[inline(always)]
            fn identity() -> $t { <$t>::NEG_INFINITY }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.max(b) }
        }
    )*};
}
float_ops!(f32, f64);

/// Bytes before the per-block partials in a reduction's scratch: the count of blocks done.
pub const SCRATCH_HEADER: usize = 16;

/// One 16-byte cell of the block's combining area.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Cell([u8; 16]);

/// Cells of the block's combining area: 4 KiB.
const CELLS: usize = 256;

/// Slots of `T` the combining area holds: a power of two.
const fn slots<T>() -> usize {
    let size = core::mem::size_of::<T>();
    assert!(size <= CELLS * 16, "a reduced value may be at most 4 KiB");
    let fit = match (CELLS * 16).checked_div(size) {
        Some(fit) => fit,
        None => CELLS,
    };
    // The largest power of two not above `fit`.
    1 << (usize::BITS - 1 - fit.leading_zeros())
}

/// `mine`, each thread's value, combined over the block: the block's total in its first thread
/// (linear thread 0), the identity in the others. Every thread of the block calls it, as it calls
/// `sync_threads` (it waits at barriers). A block's partial sum in one line:
/// `let total = block_reduce::<Sum, _>(mine);` — the same bits on every backend for the same
/// block size, whatever the warp width.
///
/// The order: threads `t >= S` (`S` slots, the largest power of two of `T` in 4 KiB) fold into
/// slot `t % S` one group of `S` threads after another; then the slots combine as a tree, slot
/// `i` with slot `i + stride`, `stride` halving from half the slots in use (rounded up to a
/// power of two).
///
/// # Panics
/// At compile time, for a `T` over 4 KiB.
#[inline(always)]
pub fn block_reduce<Op: ReduceOp<T>, T: DeviceCopy>(mine: T) -> T {
    let area = crate::shared!([Cell; CELLS]);
    let slot = area.as_ptr() as *mut T;
    let capacity = const { slots::<T>() };
    let threads = block_dim().count() as usize;
    let t = thread_idx().linear_in(block_dim());
    let group = t / capacity;
    let at = t % capacity;
    let groups = threads.div_ceil(capacity);
    for g in 0..groups {
        if g == group {
            let folded = if g == 0 {
                mine
            } else {
                // SAFETY: slot `at` was written by thread `at + (g - 1) * capacity` before the
                // last barrier; between barriers only this thread touches it.
                Op::combine(unsafe { slot.add(at).read() }, mine)
            };
            // SAFETY: `at < capacity`, inside the 4 KiB area, aligned for `T` (16-byte cells,
            // `T` aligned to at most 16 as every `DeviceCopy` kernel value is).
            unsafe { slot.add(at).write(folded) };
        }
        sync_threads();
    }
    let used = threads.min(capacity);
    let mut stride = used.next_power_of_two() / 2;
    while stride > 0 {
        if t < stride && t + stride < used {
            // SAFETY: slots `t` and `t + stride` were written before the last barrier; in this
            // round only thread `t` reads `t + stride` and writes `t`.
            unsafe {
                let a = slot.add(t).read();
                let b = slot.add(t + stride).read();
                slot.add(t).write(Op::combine(a, b));
            }
        }
        sync_threads();
        stride /= 2;
    }
    let total = if t == 0 {
        // SAFETY: written by thread 0 before the last barrier.
        unsafe { slot.read() }
    } else {
        Op::identity()
    };
    // The area is free again once thread 0 has read it (another reduction may follow).
    sync_threads();
    total
}

/// Combine every thread's `mine` over the launch and fold the total into `*target`:
/// `*target = op(*target, total)`. Each block's total (see [`block_reduce`]) goes to its slot of
/// `scratch`; the last block to finish combines the `blocks` slots, thread `t` folding slots
/// `t, t + B, t + 2B, …` in order, then as a block again. Every thread of the launch calls it,
/// after the kernel body.
///
/// # Safety
/// `scratch` is the launch's reduction scratch for this parameter: `SCRATCH_HEADER` zeroed bytes
/// then `blocks` slots of `T`, 16-byte aligned, with `blocks` the grid's block count; `target`
/// points to one `T` that only this call writes during the launch.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn combine_launch<T: DeviceCopy, Op: ReduceOp<T>>(
    mine: T,
    scratch: *mut u8,
    blocks: usize,
    target: *mut T,
) {
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    if crate::host_block::runs_plain() {
        // SAFETY: the caller's contract.
        return unsafe { plain::combine_launch::<T, Op>(mine, scratch, blocks, target) };
    }
    let block_total = block_reduce::<Op, T>(mine);
    let first = thread_idx().linear_in(block_dim()) == 0;
    let grid = grid_dim();
    assert!(
        blocks == grid.count() as usize,
        "reduction scratch does not match the grid"
    );
    // SAFETY: the scratch starts with the zeroed counter and holds `blocks` slots after the
    // header, per the contract.
    let (done, partials) = unsafe {
        (
            &*(scratch as *const AtomicU32),
            scratch.add(SCRATCH_HEADER) as *mut T,
        )
    };
    let last_flag = crate::shared!([u32; 1]);
    if first {
        let b = block_idx().linear_in(grid);
        // SAFETY: slot `b` is this block's alone; read only by the last block, after the fence
        // and the counter below.
        unsafe { partials.add(b).write_volatile(block_total) };
        // Publish the slot before counting the block as done.
        crate::fence_device();
        let before = done.fetch_add(1, Relaxed);
        last_flag.write_mine((before as usize == blocks - 1) as u32);
    }
    sync_threads();
    // SAFETY: written by thread 0 before the barrier.
    let last = unsafe { last_flag.read(0) } != 0;
    sync_threads();
    if !last {
        return;
    }
    // Every other block's slot was published before its count.
    crate::fence_device();
    let threads = block_dim().count() as usize;
    let mut acc = Op::identity();
    let mut j = thread_idx().linear_in(block_dim());
    while j < blocks {
        // SAFETY: slot `j` < `blocks` was written by block `j` before it counted itself done,
        // and nothing writes it any more.
        acc = Op::combine(acc, unsafe { partials.add(j).read_volatile() });
        j += threads;
    }
    let total = block_reduce::<Op, T>(acc);
    if first {
        // SAFETY: only thread 0 of the last block writes the target, once, per the contract.
        unsafe { target.write(Op::combine(target.read(), total)) };
        // The scratch may be used again: no block counts after this one.
        done.store(0, Relaxed);
    }
}

/// The same combination on the host backend's fast path, where a block's threads run one after
/// another as plain calls on one OS thread: each thread's value is kept until the block's last
/// thread, which combines them in `block_reduce`'s order, and then does the grid's part as the
/// block's thread 0 would. A block whose threads do not all run here, in order, goes to the block
/// scheduler (`NeedsBlockModel`).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod plain {
    use super::{slots, ReduceOp, SCRATCH_HEADER};
    use crate::{block_dim, block_idx, grid_dim, thread_idx, DeviceCopy};
    use core::cell::RefCell;
    use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
    use std::vec::Vec;

    /// The values so far of the block that this OS thread runs, per reduction (by its scratch):
    /// the scratch, the block's linear index and the values' bytes, thread by thread.
    struct Pending {
        scratch: usize,
        block: usize,
        bytes: Vec<u8>,
    }

    std::thread_local! {
        static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
    }

    /// `block_reduce` of `values` (thread `t`'s at index `t`), one step after another.
    fn combine_values<T: DeviceCopy, Op: ReduceOp<T>>(values: &[T]) -> T {
        let capacity = slots::<T>();
        let used = values.len().min(capacity);
        let mut slot = values[..used].to_vec();
        for (t, &v) in values.iter().enumerate().skip(capacity) {
            slot[t % capacity] = Op::combine(slot[t % capacity], v);
        }
        let mut stride = used.next_power_of_two() / 2;
        while stride > 0 {
            for t in 0..stride.min(used - stride) {
                slot[t] = Op::combine(slot[t], slot[t + stride]);
            }
            stride /= 2;
        }
        slot[0]
    }

    /// # Safety
    /// As `super::combine_launch`.
    pub(super) unsafe fn combine_launch<T: DeviceCopy, Op: ReduceOp<T>>(
        mine: T,
        scratch: *mut u8,
        blocks: usize,
        target: *mut T,
    ) {
        let size = core::mem::size_of::<T>();
        let threads = block_dim().count() as usize;
        let t = thread_idx().linear_in(block_dim());
        let grid = grid_dim();
        let block = block_idx().linear_in(grid);
        let values = PENDING.with(|pending| {
            let mut pending = pending.borrow_mut();
            let at = pending.iter().position(|p| p.scratch == scratch as usize);
            let entry = match (at, t) {
                (Some(i), _) if pending[i].block == block && pending[i].bytes.len() == t * size => {
                    &mut pending[i]
                }
                (at, 0) => {
                    let fresh = Pending {
                        scratch: scratch as usize,
                        block,
                        bytes: Vec::with_capacity(threads * size),
                    };
                    match at {
                        Some(i) => {
                            pending[i] = fresh;
                            &mut pending[i]
                        }
                        None => {
                            pending.push(fresh);
                            pending.last_mut().unwrap()
                        }
                    }
                }
                // Threads of this block ran elsewhere or out of order.
                _ => crate::host_block::needs_block_model(),
            };
            // SAFETY: `mine` is a `T` of `size` bytes.
            entry.bytes.extend_from_slice(unsafe {
                core::slice::from_raw_parts(&mine as *const T as *const u8, size)
            });
            if t + 1 < threads {
                return None;
            }
            let index = at.unwrap_or(pending.len() - 1);
            let done = pending.swap_remove(index);
            Some(
                done.bytes
                    .chunks_exact(size.max(1))
                    // SAFETY: each chunk holds the bytes of one `T`.
                    .map(|b| unsafe { (b.as_ptr() as *const T).read_unaligned() })
                    .collect::<Vec<T>>(),
            )
        });
        let Some(values) = values else { return };
        let block_total = combine_values::<T, Op>(&values);
        // SAFETY: the scratch holds the zeroed counter and `blocks` slots (the contract).
        let (done, partials) = unsafe {
            (
                &*(scratch as *const AtomicU32),
                scratch.add(SCRATCH_HEADER) as *mut T,
            )
        };
        assert!(
            blocks == grid.count() as usize,
            "reduction scratch does not match the grid"
        );
        // SAFETY: slot `block` is this block's alone.
        unsafe { partials.add(block).write(block_total) };
        crate::fence_device();
        if done.fetch_add(1, Relaxed) as usize != blocks - 1 {
            return;
        }
        crate::fence_device();
        let accs: Vec<T> = (0..threads)
            .map(|t| {
                (t..blocks).step_by(threads).fold(Op::identity(), |acc, j| {
                    // SAFETY: every block wrote its slot before counting itself done.
                    Op::combine(acc, unsafe { partials.add(j).read() })
                })
            })
            .collect();
        let total = combine_values::<T, Op>(&accs);
        // SAFETY: only the last block writes the target, once (the contract).
        unsafe { target.write(Op::combine(target.read(), total)) };
        done.store(0, Relaxed);
    }
}
