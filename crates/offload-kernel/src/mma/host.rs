//! The host backend's tensor cores: the warp's lanes trade their fragments through the block's
//! memory, then each lane computes its part of the result in the documented order.

use crate::host_block::{self, Group};
use crate::index::{block_dim, thread_idx};
use crate::warp::warp_size;

/// Lanes of the warp that a tensor-core operation spans: PTX's fragments are laid out over 32.
const WARP_SIZE: u32 = 32;

/// 64-bit words a lane can contribute to one gather.
const WORDS: usize = 12;

/// One lane's contribution: its words and whether it is there.
#[repr(C)]
struct Slot {
    present: u64,
    words: [u64; WORDS],
}

/// Every lane's `words`, indexed by lane, once all 32 lanes of the calling thread's warp have
/// called this (two warp-wide waits: one before reading, one after, so the slots can be reused).
///
/// # Panics
/// If a lane of the warp does not exist or has returned (`operation` names the caller): tensor
/// core operations need the whole warp. Likewise under 64-lane host warps
/// (`OFFLOAD_HOST_WARP_SIZE=64`), which the fragments' layout does not fit.
pub(super) fn warp_gather<const W: usize>(
    words: [u64; W],
    operation: &str,
) -> [[u64; W]; WARP_SIZE as usize] {
    const { assert!(W <= WORDS) };
    assert!(
        warp_size() == WARP_SIZE,
        "{operation}: tensor-core operations need 32-lane warps, not {} (OFFLOAD_HOST_WARP_SIZE)",
        warp_size()
    );
    static SITE: u8 = 0;
    let threads = block_dim().count() as usize;
    let me = thread_idx().linear_in(block_dim());
    let slots =
        host_block::static_shared(&SITE, threads * core::mem::size_of::<Slot>()) as *mut Slot;
    // SAFETY: the block's allocation holds one Slot per thread (16-byte aligned); this thread
    // writes only its own slot, and the block's threads run one at a time on this OS thread.
    unsafe {
        let mine = &mut *slots.add(me);
        mine.words[..W].copy_from_slice(&words);
        mine.present = 1;
    }
    host_block::suspend(Group::Warp);
    let first = me / WARP_SIZE as usize * WARP_SIZE as usize;
    let mut all = [[0u64; W]; WARP_SIZE as usize];
    for (lane, out) in all.iter_mut().enumerate() {
        let t = first + lane;
        // SAFETY: t < threads is checked first; slots are only written before the first wait.
        let slot = (t < threads).then(|| unsafe { &*slots.add(t) });
        match slot {
            Some(s) if s.present == 1 => out.copy_from_slice(&s.words[..W]),
            _ => panic!(
                "{operation}: lane {lane} of warp {} does not take part; tensor-core operations \
                 need all 32 lanes of the warp (a block size that is a multiple of 32, no lane \
                 returned before the call)",
                me / WARP_SIZE as usize
            ),
        }
    }
    host_block::suspend(Group::Warp);
    // SAFETY: as above; every lane has read the slots (second wait).
    unsafe { (*slots.add(me)).present = 0 };
    all
}

/// `c + Σ a·b` over `terms` in order, one fused multiply-add (rounded to nearest-even) per term.
pub(super) fn dot_f32(c: f32, terms: impl Iterator<Item = (f32, f32)>) -> f32 {
    terms.fold(c, |acc, (a, b)| a.mul_add(b, acc))
}
