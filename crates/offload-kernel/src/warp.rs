//! Warp-level operations: the threads of consecutive linear index in a block that the hardware
//! runs together (a warp: 32 threads on NVIDIA GPUs; a wavefront on AMD GPUs: 64 on CDNA, such as
//! gfx90a and gfx942, 32 on RDNA, such as gfx1100; 32 or 64 on the host backend, see
//! [`warp_size`]) trade values in registers (shuffles), agree on predicates (votes) and reduce
//! values without shared memory, as CUDA's `__shfl_*_sync`, `__any_sync`/`__all_sync`/
//! `__ballot_sync` and `__reduce_*_sync`.
//!
//! # Taking part
//! Every function here is a collective operation of the calling thread's warp: all threads of the
//! warp that have not returned from the kernel must call the same function, the same number of
//! times (call it from code that the whole warp reaches, not from inside a branch that only some
//! lanes take). The operation waits for them (PTX `*.sync` with the mask of the warp's lanes; an
//! AMD wavefront runs its lanes in lockstep). Lanes of a partial last warp (a block size that is
//! not a multiple of the warp size) and lanes that have returned just do not take part. A lane
//! that reads from one that does not take part gets an unspecified value (its own on the host
//! backend). Breaking the rule cannot touch memory, so the functions are safe; on the GPU lanes
//! that diverge from such a call wait for each other (or hang, if some never arrive), and on the
//! host backend a call that some live lanes skip while waiting elsewhere fails the launch
//! (`Err(KernelFailed)` naming the deadlock).
//!
//! Offsets and lane numbers are taken modulo the warp size, as PTX takes them modulo 32. Values
//! are `i32`, `u32`, `f32` (one 32-bit shuffle), `i64`, `u64` or `f64` (two). Code that sizes
//! per-warp storage uses [`MAX_WARP_SIZE`]; code that walks lanes uses [`warp_size`].
//!
//! # SPIR-V (Intel GPUs)
//! A warp is an OpenCL sub-group. Intel GPUs run sub-groups of 8, 16 or 32 work-items; offload's
//! SPIR-V warps are 32 wide, so the device pass requires sub-groups of 32 for every kernel that
//! uses a warp operation (`intel_reqd_sub_group_size(32)`, SPIR-V `SubgroupSize 32`), and a
//! device without that size refuses the image. Lanes and warps are then the sub-group local id
//! and the sub-group id; shuffles, ballots and `sync_warp` are the sub-group built-ins of
//! `cl_khr_subgroup_shuffle`, `cl_khr_subgroup_non_uniform_arithmetic` and a sub-group
//! `OpControlBarrier`, which leave out work-items that returned, as PTX does.

#[cfg(not(all(target_arch = "nvptx64", feature = "spirv")))]
use crate::index::{block_dim, thread_idx};

/// Which lane a shuffle reads: PTX `shfl.sync`'s `idx`, `up`, `down` and `bfly`.
#[derive(Clone, Copy)]
enum Mode {
    Index,
    Up,
    Down,
    Xor,
}

/// The most threads a warp has on any backend (AMD's 64-lane wavefronts): enough for per-lane
/// storage whatever the device. [`ballot`]'s mask has this many bits.
pub const MAX_WARP_SIZE: u32 = 64;

/// Threads per warp where the kernel runs: 32 on NVIDIA GPUs and SPIR-V, the wavefront size on AMD GPUs
/// (64 on gfx90a and gfx942, 32 on gfx1100), and on the host backend 32 unless
/// `OFFLOAD_HOST_WARP_SIZE=64` asks for AMD's width. A power of two.
#[inline(always)]
pub fn warp_size() -> u32 {
    arch::warp_size()
}

/// This thread's lane in its warp: its linear index in the block, modulo [`warp_size`].
#[inline(always)]
pub fn lane_id() -> u32 {
    #[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
    // SAFETY: reads a built-in variable.
    return unsafe { crate::spirv::get_sub_group_local_id() };
    #[cfg(not(all(target_arch = "nvptx64", feature = "spirv")))]
    return linear_thread() & (warp_size() - 1);
}

/// This thread's warp in its block: its linear index in the block, divided by [`warp_size`].
#[inline(always)]
pub fn warp_id() -> u32 {
    #[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
    // SAFETY: reads a built-in variable.
    return unsafe { crate::spirv::get_sub_group_id() };
    #[cfg(not(all(target_arch = "nvptx64", feature = "spirv")))]
    return linear_thread() / warp_size();
}

/// The lane that `mode` with operand `b` reads for `lane` in a warp of `size` lanes, as PTX
/// `shfl.sync` computes it for a whole-warp width; `None` where the lane keeps its own value.
#[cfg(not(all(target_arch = "nvptx64", not(feature = "spirv"))))]
#[inline(always)]
fn source_lane(mode: Mode, lane: u32, b: u32, size: u32) -> Option<u32> {
    let b = b & (size - 1);
    match mode {
        Mode::Index => Some(b),
        Mode::Up => lane.checked_sub(b),
        Mode::Down => Some(lane + b).filter(|&j| j < size),
        Mode::Xor => Some(lane ^ b),
    }
}

#[cfg(not(all(target_arch = "nvptx64", feature = "spirv")))]
#[inline(always)]
fn linear_thread() -> u32 {
    thread_idx().linear_in(block_dim()) as u32
}

/// A value a warp operation can carry: any bit pattern of its width is a valid value.
pub trait WarpValue: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn to_word(self) -> u64;
    #[doc(hidden)]
    fn from_word(word: u64) -> Self;
    /// Two 32-bit shuffles rather than one.
    #[doc(hidden)]
    const WIDE: bool;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! warp_value {
    ($($t:ty => $bits:ty, $wide:literal);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl WarpValue for $t {
            #[inline(always)]
            fn to_word(self) -> u64 {
                <$bits>::from_ne_bytes(self.to_ne_bytes()) as u64
            }
            #[inline(always)]
            fn from_word(word: u64) -> Self {
                <$t>::from_ne_bytes((word as $bits).to_ne_bytes())
            }
            const WIDE: bool = $wide;
        }
    )*};
}

warp_value! {
    i32 => u32, false;
    u32 => u32, false;
    f32 => u32, false;
    i64 => u64, true;
    u64 => u64, true;
    f64 => u64, true;
}

/// The value of `v` in lane `src_lane` (`__shfl_sync`).
#[inline(always)]
pub fn shuffle<T: WarpValue>(v: T, src_lane: u32) -> T {
    arch::shuffle(v, Mode::Index, src_lane)
}

/// The value of `v` in lane `lane_id() - delta`; lanes below `delta` keep their own
/// (`__shfl_up_sync`).
#[inline(always)]
pub fn shuffle_up<T: WarpValue>(v: T, delta: u32) -> T {
    arch::shuffle(v, Mode::Up, delta)
}

/// The value of `v` in lane `lane_id() + delta`; lanes past the warp's last keep their own
/// (`__shfl_down_sync`).
#[inline(always)]
pub fn shuffle_down<T: WarpValue>(v: T, delta: u32) -> T {
    arch::shuffle(v, Mode::Down, delta)
}

/// The value of `v` in lane `lane_id() ^ lane_mask` (`__shfl_xor_sync`, a butterfly).
#[inline(always)]
pub fn shuffle_xor<T: WarpValue>(v: T, lane_mask: u32) -> T {
    arch::shuffle(v, Mode::Xor, lane_mask)
}

/// Whether `predicate` holds in any lane taking part (`__any_sync`).
#[inline(always)]
pub fn vote_any(predicate: bool) -> bool {
    ballot(predicate) != 0
}

/// Whether `predicate` holds in every lane taking part (`__all_sync`).
#[inline(always)]
pub fn vote_all(predicate: bool) -> bool {
    ballot(!predicate) == 0
}

/// Bit `i` set when lane `i` takes part and its `predicate` holds (`__ballot_sync`). Bits at and
/// above [`warp_size`] are 0.
#[inline(always)]
pub fn ballot(predicate: bool) -> u64 {
    arch::ballot(predicate)
}

/// Wait for the other lanes of the warp and order their memory accesses (`__syncwarp`).
#[inline(always)]
pub fn sync_warp() {
    arch::sync_warp()
}

/// `op` folded over `v` of every lane taking part; every lane gets the same result, with the same
/// bits on the GPU and on the host backend at the same warp size, whatever `op` (for a float sum,
/// say, the order of the additions is fixed): a full warp combines as a butterfly
/// (`op(v, v of lane ^ warp_size/2)`, then a quarter, ..., 1) and takes lane 0's result; a
/// partial warp folds its lanes in increasing order.
#[inline(always)]
pub fn warp_reduce<T: WarpValue>(v: T, op: impl Fn(T, T) -> T) -> T {
    let lanes = ballot(true);
    let size = warp_size();
    if lanes == u64::MAX >> (MAX_WARP_SIZE - size) {
        let mut acc = v;
        let mut offset = size / 2;
        while offset > 0 {
            acc = op(acc, shuffle_xor(acc, offset));
            offset /= 2;
        }
        shuffle(acc, 0)
    } else {
        let first = lanes.trailing_zeros();
        let mut acc = shuffle(v, first);
        let mut rest = lanes & (lanes - 1);
        // Every lane runs this loop the same number of times: `lanes` is the same in all.
        while rest != 0 {
            acc = op(acc, shuffle(v, rest.trailing_zeros()));
            rest &= rest - 1;
        }
        acc
    }
}

/// Sum over the warp (wrapping for integers), see [`warp_reduce`].
#[inline(always)]
pub fn warp_sum<T: WarpValue + WarpSum>(v: T) -> T {
    warp_reduce(v, T::warp_add)
}

/// Minimum over the warp by `<`, see [`warp_reduce`] (with NaN lanes the result depends on
/// where they are, the same way on every backend).
#[inline(always)]
pub fn warp_min<T: WarpValue + PartialOrd>(v: T) -> T {
    warp_reduce(v, |a, b| if b < a { b } else { a })
}

/// Maximum over the warp by `>`, see [`warp_reduce`].
#[inline(always)]
pub fn warp_max<T: WarpValue + PartialOrd>(v: T) -> T {
    warp_reduce(v, |a, b| if b > a { b } else { a })
}

/// Addition as [`warp_sum`] does it: wrapping for integers, IEEE for floats.
pub trait WarpSum: sealed::Sealed {
    /// `a + b` as `warp_sum` adds: wrapping for integers, IEEE for floats.
    fn warp_add(a: Self, b: Self) -> Self;
}

macro_rules! warp_sum {
    (wrapping: $($t:ty),*; ieee: $($f:ty),*) => {
        $(impl WarpSum for $t {
            #[inline(always)]
            fn warp_add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
        })*
        $(impl WarpSum for $f {
            #[inline(always)]
            fn warp_add(a: Self, b: Self) -> Self {
                a + b
            }
        })*
    };
}

warp_sum!(wrapping: i32, u32, i64, u64; ieee: f32, f64);

#[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
mod arch {
    use super::{lane_id, Mode, WarpValue};
    use crate::spirv;

    const WARP_SIZE: u32 = 32;

    #[inline(always)]
    pub(super) fn warp_size() -> u32 {
        WARP_SIZE
    }

    #[inline(always)]
    pub(super) fn shuffle<T: WarpValue>(v: T, mode: Mode, b: u32) -> T {
        let lane = lane_id();
        // Every lane shuffles (the operation is collective); one whose source is out of range
        // reads its own value and keeps it.
        let source = super::source_lane(mode, lane, b, WARP_SIZE);
        let from = source.unwrap_or(lane);
        let word = v.to_word();
        // SAFETY: sub-group shuffles of plain integers; any lane index is allowed (an inactive
        // or missing one gives an unspecified value, as documented).
        let read = unsafe {
            if T::WIDE {
                spirv::sub_group_shuffle_u64(word, from)
            } else {
                spirv::sub_group_shuffle_u32(word as u32, from) as u64
            }
        };
        T::from_word(if source.is_some() { read } else { word })
    }

    #[inline(always)]
    pub(super) fn ballot(predicate: bool) -> u64 {
        // Lanes hold distinct bits, so the OR over the lanes that take part is the ballot.
        // SAFETY: a sub-group reduction over the active work-items.
        unsafe { spirv::sub_group_non_uniform_reduce_or((predicate as u32) << lane_id()) as u64 }
    }

    #[inline(always)]
    pub(super) fn sync_warp() {
        // SAFETY: a sub-group barrier; memory is not declared untouched, so accesses stay on
        // their side.
        unsafe {
            spirv::control_barrier(
                spirv::SPIRV_SCOPE_SUBGROUP,
                spirv::SPIRV_SCOPE_SUBGROUP,
                spirv::SPIRV_SUBGROUP_BARRIER_SEMANTICS,
            )
        }
    }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod arch {
    use super::{linear_thread, Mode, WarpValue};
    use crate::index::block_dim;

    const WARP_SIZE: u32 = 32;

    #[inline(always)]
    pub(super) fn warp_size() -> u32 {
        WARP_SIZE
    }

    /// The lanes of this thread's warp that exist: all 32 but in a partial last warp.
    #[inline(always)]
    fn warp_lanes() -> u32 {
        let threads = block_dim().count() as u32;
        let first = linear_thread() & !(WARP_SIZE - 1);
        let lanes = threads - first;
        if lanes >= WARP_SIZE {
            u32::MAX
        } else {
            (1u32 << lanes) - 1
        }
    }

    macro_rules! shfl {
        ($name:ident, $mode:literal) => {
            #[inline(always)]
            fn $name(v: u32, b: u32, clamp: u32, lanes: u32) -> u32 {
                let d: u32;
                // SAFETY: `lanes` holds this thread and names only lanes that exist; `shfl.sync`
                // waits for those that have not exited. Any bits are a valid u32.
                unsafe {
                    core::arch::asm!(
                        concat!("shfl.sync.", $mode, ".b32 {d}, {v}, {b}, {c}, {lanes};"),
                        d = out(reg32) d,
                        v = in(reg32) v,
                        b = in(reg32) b,
                        c = in(reg32) clamp,
                        lanes = in(reg32) lanes,
                        options(nostack),
                    );
                }
                d
            }
        };
    }

    shfl!(shfl_idx, "idx");
    shfl!(shfl_up, "up");
    shfl!(shfl_down, "down");
    shfl!(shfl_bfly, "bfly");

    #[inline(always)]
    pub(super) fn shuffle<T: WarpValue>(v: T, mode: Mode, b: u32) -> T {
        let lanes = warp_lanes();
        // The c operand: the lowest source lane (0) for up, the highest (31) for the others;
        // no segments (the whole warp).
        let word = v.to_word();
        let one = |half: u32| match mode {
            Mode::Index => shfl_idx(half, b, 31, lanes),
            Mode::Up => shfl_up(half, b, 0, lanes),
            Mode::Down => shfl_down(half, b, 31, lanes),
            Mode::Xor => shfl_bfly(half, b, 31, lanes),
        };
        let low = one(word as u32) as u64;
        let high = if T::WIDE {
            (one((word >> 32) as u32) as u64) << 32
        } else {
            0
        };
        T::from_word(high | low)
    }

    #[inline(always)]
    pub(super) fn ballot(predicate: bool) -> u64 {
        let bits: u32;
        // SAFETY: as in `shfl!`: `vote.sync` waits for the existing lanes that have not exited.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred offload_p; setp.ne.u32 offload_p, {v}, 0; vote.sync.ballot.b32 {d}, offload_p, {lanes}; }}",
                d = out(reg32) bits,
                v = in(reg32) predicate as u32,
                lanes = in(reg32) warp_lanes(),
                options(nostack),
            );
        }
        bits as u64
    }

    #[inline(always)]
    pub(super) fn sync_warp() {
        // SAFETY: as in `shfl!`; memory is not declared untouched, so accesses stay on their side.
        unsafe {
            core::arch::asm!("bar.warp.sync {lanes};", lanes = in(reg32) warp_lanes(), options(nostack));
        }
    }
}

/// AMD wavefronts: shuffles through `ds_bpermute` (each lane reads the lane whose index × 4 it
/// passes), votes through `llvm.amdgcn.ballot`. A wavefront's lanes run in lockstep, so lanes
/// that returned or lie past the block's end are simply inactive.
#[cfg(target_arch = "amdgpu")]
mod arch {
    use super::{lane_id, Mode, WarpValue};

    #[inline(always)]
    pub(super) fn warp_size() -> u32 {
        core::arch::amdgpu::wavefrontsize()
    }

    #[inline(always)]
    pub(super) fn shuffle<T: WarpValue>(v: T, mode: Mode, b: u32) -> T {
        let source = super::source_lane(mode, lane_id(), b, warp_size()).unwrap_or(lane_id());
        let word = v.to_word();
        // SAFETY: ds_bpermute only reads another lane's register; any bits are a valid u32.
        let one = |half: u32| unsafe { core::arch::amdgpu::ds_bpermute(source * 4, half) };
        let low = one(word as u32) as u64;
        let high = if T::WIDE {
            (one((word >> 32) as u32) as u64) << 32
        } else {
            0
        };
        T::from_word(high | low)
    }

    #[inline(always)]
    pub(super) fn ballot(predicate: bool) -> u64 {
        core::arch::amdgpu::ballot(predicate)
    }

    #[inline(always)]
    pub(super) fn sync_warp() {
        // SAFETY: defined by offload-build's AMD link step; a fence and a wave barrier.
        unsafe { crate::amdgpu::__offload_amdgpu_sync_warp() }
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::{lane_id, Mode, WarpValue};
    use crate::host_block::{exchange, suspend, Group};

    pub(super) use crate::index::host_context::warp_size;

    pub(super) fn shuffle<T: WarpValue>(v: T, mode: Mode, b: u32) -> T {
        let source = super::source_lane(mode, lane_id(), b, warp_size());
        exchange(Group::Warp, v.to_word(), |lanes| {
            source
                .and_then(|j| lanes.get(j as usize).copied().flatten())
                .map_or(v, T::from_word)
        })
    }

    pub(super) fn ballot(predicate: bool) -> u64 {
        exchange(Group::Warp, predicate as u64, |lanes| {
            lanes
                .iter()
                .enumerate()
                .filter(|(_, p)| **p == Some(1))
                .fold(0, |bits, (lane, _)| bits | 1 << lane)
        })
    }

    pub(super) fn sync_warp() {
        suspend(Group::Warp);
    }
}
