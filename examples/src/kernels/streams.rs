//! A kernel whose arithmetic per element is chosen at launch: to balance compute against copies
//! when showing streams overlap them.

/// `y[i] += p(x[i])`, where `p` applies `v ← v·0.999 + 0.001` `steps` times.
#[offload::kernel]
pub fn relax(steps: u32, x: &[f32], y: &mut [f32]) {
    for (i, y) in y.iter_mine() {
        let mut v = x[i];
        for _ in 0..steps {
            v = v * 0.999 + 0.001;
        }
        *y += v;
    }
}
