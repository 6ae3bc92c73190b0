//! The PTX instructions behind the tensor-core operations (nvptx64 only).
//!
//! The `mma` and `ldmatrix` blocks are not `pure`: LLVM treats them as having side effects, so
//! it neither removes them nor moves them in or out of branches (each is collective over the
//! warp, and must stay where the whole warp executes it).

macro_rules! ldmatrix_x4 {
    ($name:ident, $trans:literal) => {
        /// # Safety
        /// The whole warp executes it; each lane's `address` starts a 16-byte row of shared
        /// memory that no thread writes concurrently.
        #[inline(always)]
        pub(super) unsafe fn $name(address: u32) -> [u32; 4] {
            let (r0, r1, r2, r3): (u32, u32, u32, u32);
            // SAFETY: the caller's contract.
            unsafe {
                core::arch::asm!(
                    concat!("ldmatrix.sync.aligned.m8n8.x4", $trans, ".shared.b16 {{{0}, {1}, {2}, {3}}}, [{a}];"),
                    out(reg32) r0, out(reg32) r1, out(reg32) r2, out(reg32) r3,
                    a = in(reg32) address,
                    options(readonly, nostack),
                );
            }
            [r0, r1, r2, r3]
        }
    };
}

ldmatrix_x4!(ldmatrix_x4, "");
ldmatrix_x4!(ldmatrix_x4_trans, ".trans");

macro_rules! mma_16816 {
    ($name:ident, $ty:literal) => {
        #[inline(always)]
        pub(super) fn $name(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
            let (d0, d1, d2, d3): (f32, f32, f32, f32);
            // SAFETY: registers only; the caller (`mma`) is collective over the warp.
            unsafe {
                core::arch::asm!(
                    concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty, ".f32 ",
                        "{{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};"),
                    out(reg32) d0, out(reg32) d1, out(reg32) d2, out(reg32) d3,
                    in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
                    in(reg32) b[0], in(reg32) b[1],
                    in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
                    options(nomem, nostack),
                );
            }
            [d0, d1, d2, d3]
        }
    };
}

mma_16816!(mma_m16n8k16_bf16, "bf16");
mma_16816!(mma_m16n8k16_f16, "f16");

#[inline(always)]
pub(super) fn mma_m16n8k8_tf32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: registers only; the caller (`mma`) is collective over the warp.
    unsafe {
        core::arch::asm!(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};",
            out(reg32) d0, out(reg32) d1, out(reg32) d2, out(reg32) d3,
            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
            in(reg32) b[0], in(reg32) b[1],
            in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
            options(nomem, nostack),
        );
    }
    [d0, d1, d2, d3]
}

#[inline(always)]
pub(super) fn mma_m8n8k4_f64(a: f64, b: f64, c: [f64; 2]) -> [f64; 2] {
    let (d0, d1): (f64, f64);
    // SAFETY: registers only; the caller (`mma`) is collective over the warp.
    unsafe {
        core::arch::asm!(
            "mma.sync.aligned.m8n8k4.row.col.rn.f64.f64.f64.f64 {{{0}, {1}}}, {{{2}}}, {{{3}}}, {{{4}, {5}}};",
            out(reg64) d0, out(reg64) d1,
            in(reg64) a, in(reg64) b,
            in(reg64) c[0], in(reg64) c[1],
            options(nomem, nostack),
        );
    }
    [d0, d1]
}

/// The `f64` shapes of sm_90: `mma.sync.aligned.$shape.row.col.f64.f64.f64.f64` with `$a` A,
/// `$b` B and 4 C/D registers (listed in order in the operand lists).
macro_rules! mma_f64_16x8 {
    ($name:ident, $shape:literal, $a:literal, $b:literal, $operands:literal,
     [$($ai:literal),*], [$($bi:literal),*]) => {
        #[cfg(target_feature = "sm_90")]
        #[inline(always)]
        pub(super) fn $name(a: [f64; $a], b: [f64; $b], c: [f64; 4]) -> [f64; 4] {
            let (d0, d1, d2, d3): (f64, f64, f64, f64);
            // SAFETY: registers only; the caller (`mma`) is collective over the warp.
            unsafe {
                core::arch::asm!(
                    concat!("mma.sync.aligned.", $shape, ".row.col.f64.f64.f64.f64 ", $operands, ";"),
                    out(reg64) d0, out(reg64) d1, out(reg64) d2, out(reg64) d3,
                    $(in(reg64) a[$ai],)*
                    $(in(reg64) b[$bi],)*
                    in(reg64) c[0], in(reg64) c[1], in(reg64) c[2], in(reg64) c[3],
                    options(nomem, nostack),
                );
            }
            [d0, d1, d2, d3]
        }
    };
}

mma_f64_16x8!(
    mma_m16n8k4_f64,
    "m16n8k4",
    2,
    1,
    "{{{0}, {1}, {2}, {3}}}, {{{4}, {5}}}, {{{6}}}, {{{7}, {8}, {9}, {10}}}",
    [0, 1],
    [0]
);
mma_f64_16x8!(
    mma_m16n8k8_f64,
    "m16n8k8",
    4,
    2,
    "{{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}}",
    [0, 1, 2, 3],
    [0, 1]
);
mma_f64_16x8!(
    mma_m16n8k16_f64,
    "m16n8k16",
    8,
    4,
    "{{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}}}, {{{12}, {13}, {14}, {15}}}, {{{16}, {17}, {18}, {19}}}",
    [0, 1, 2, 3, 4, 5, 6, 7],
    [0, 1, 2, 3]
);
