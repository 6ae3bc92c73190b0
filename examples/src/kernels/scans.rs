//! Device-wide prefix scans (`offload::scan_kernel!`): sum, min and max of the primitive types,
//! a user's `Reduce` types (a running minimum with its index; affine maps, whose composition is
//! associative but not commutative), and stream compaction on the exclusive scan.

use super::reductions::MinLoc;
use offload::prelude::*;
use offload::reduce::{Max, Min, Own, Sum};

offload::scan_kernel!(pub scan_sum_u32(u32, Sum));
offload::scan_kernel!(pub scan_min_u32(u32, Min));
offload::scan_kernel!(pub scan_max_u32(u32, Max));
offload::scan_kernel!(pub scan_sum_u64(u64, Sum));
offload::scan_kernel!(pub scan_min_u64(u64, Min));
offload::scan_kernel!(pub scan_max_u64(u64, Max));
offload::scan_kernel!(pub scan_sum_i32(i32, Sum));
offload::scan_kernel!(pub scan_min_i32(i32, Min));
offload::scan_kernel!(pub scan_max_i32(i32, Max));
offload::scan_kernel!(pub scan_sum_i64(i64, Sum));
offload::scan_kernel!(pub scan_min_i64(i64, Min));
offload::scan_kernel!(pub scan_max_i64(i64, Max));
offload::scan_kernel!(pub scan_sum_f32(f32, Sum));
offload::scan_kernel!(pub scan_min_f32(f32, Min));
offload::scan_kernel!(pub scan_max_f32(f32, Max));
offload::scan_kernel!(pub scan_sum_f64(f64, Sum));
offload::scan_kernel!(pub scan_min_f64(f64, Min));
offload::scan_kernel!(pub scan_max_f64(f64, Max));

// The running minimum with its index (the lower index on ties), through its `Reduce`.
offload::scan_kernel!(pub scan_min_loc(MinLoc, Own));

/// The affine map `x ↦ a·x + b` over wrapping `u32`s, combined as composition (`self`, then
/// `other`): associative, not commutative, so a scan of them checks the order of the combines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, DeviceCopy)]
#[repr(C)]
pub struct Affine {
    pub a: u32,
    pub b: u32,
}

impl Reduce for Affine {
    fn identity() -> Self {
        Affine { a: 1, b: 0 }
    }
    fn combine(self, other: Self) -> Self {
        // other(self(x)) = a2·(a1·x + b1) + b2.
        Affine {
            a: self.a.wrapping_mul(other.a),
            b: other.a.wrapping_mul(self.b).wrapping_add(other.b),
        }
    }
}

offload::scan_kernel!(pub scan_affine(Affine, Own));

/// `flags[i] = 1` where `x[i] > threshold`, else 0: the test of the compaction.
#[offload::kernel]
pub fn flag_above(threshold: f32, x: &[f32], flags: &mut [u32]) {
    for (i, f) in flags.iter_mine() {
        *f = (x[i] > threshold) as u32;
    }
}

/// Stream compaction's last step: `out[j]` = the index of the `j`-th flagged element, from
/// `positions`, the exclusive sum scan of the 0/1 `flags` (`out` as long as the count of
/// flags). Each output element finds its index by a binary search of `positions`, which does not
/// decrease: the flagged element `i` is the one with `positions[i] == j` before the first
/// position above `j`. Safe code: each thread writes only the outputs it owns.
#[offload::kernel]
pub fn gather_flagged(positions: &[u32], out: &mut [u32]) {
    for (j, o) in out.iter_mine() {
        let j = j as u32;
        // The first i with positions[i] > j (positions.len() if none), minus one.
        let (mut lo, mut hi) = (0usize, positions.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if positions[mid] > j {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        *o = (lo - 1) as u32;
    }
}
