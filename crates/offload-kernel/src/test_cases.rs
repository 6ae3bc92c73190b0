//! The case lists that the views' unit tests walk: every case natively, fewer under Miri, which
//! checks the unsafe views for undefined behaviour (the same code for every length and block
//! size) and not the ownership arithmetic that the native run covers.

/// Threads per block: one, a few, and more than a 16-byte chunk of `u32` holds; under Miri the
/// first two.
pub(crate) const THREADS: &[u32] = if cfg!(miri) { &[1, 3] } else { &[1, 3, 8] };

/// View lengths from 0 to 9: every one natively, every third under Miri.
pub(crate) fn lengths() -> impl Iterator<Item = usize> + Clone {
    (0..=9).step_by(if cfg!(miri) { 3 } else { 1 })
}
