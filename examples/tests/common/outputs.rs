//! Loops over several outputs and inputs (`kernels::outputs`) against plain CPU loops: ownership
//! loops over tuples of three and four outputs, a 16-byte update with three inputs, 16-byte maps
//! and updates of several outputs; lengths 0..=9 at every offset from a 16-byte boundary, outputs
//! of unequal lengths (only the shortest length's indices are written), several launch shapes.
use offload::{Device, Launch};
use offload_examples::kernels::outputs;
use std::fmt::Debug;

/// The default launch, one thread, one block of 3 and of 8 threads, and odd 3D blocks and grid.
fn shapes(device: &Device) -> Vec<(&'static str, Launch<'_>)> {
    vec![
        ("default", Launch::on(device)),
        ("1 thread", Launch::on(device).grid(1).block(1)),
        ("3 threads", Launch::on(device).grid(1).block(3)),
        ("8 threads", Launch::on(device).grid(1).block(8)),
        (
            "2x3 blocks of 3x2",
            Launch::on(device).grid((2, 3, 1)).block((3, 1, 2)),
        ),
    ]
}

/// The index in `buf` whose address lies `residue` bytes past a 16-byte boundary.
fn at_residue<T>(buf: &[T], residue: usize) -> usize {
    let size = std::mem::size_of::<T>();
    (residue + 16 - buf.as_ptr() as usize % 16) % 16 / size
}

/// `got` is `before` except at `at..at + written`, where element `at + i` is `want(i)`.
fn check<T: PartialEq + Debug + Copy>(
    got: &[T],
    before: &[T],
    at: usize,
    written: usize,
    want: impl Fn(usize) -> T,
    what: &str,
) {
    for (j, (&g, &b)) in got.iter().zip(before).enumerate() {
        let w = match j.checked_sub(at) {
            Some(i) if i < written => want(i),
            _ => b,
        };
        assert_eq!(
            g, w,
            "{what}: element {j} (output from {at}, {written} written)"
        );
    }
}

/// Lengths for the byte kernels: 0..=9 (no whole chunk), and around one and two chunks of 16.
const BYTE_LENS: [usize; 17] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47];

fn bytes(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 37 + seed * 101 + 3) as u8).collect()
}

/// Unequal lengths around `n`: all equal, and each output the shortest in turn.
fn unequal(n: usize) -> [[usize; 3]; 4] {
    [
        [n, n, n],
        [n, n + 2, n + 5],
        [n + 3, n, n + 1],
        [n + 1, n + 4, n],
    ]
}

pub fn tuple_of_three_outputs_matches_cpu(device: &Device) {
    for n in 0..=9usize {
        let x: Vec<u32> = (0..n + 9)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761))
            .collect();
        for [la, lb, lc] in unequal(n) {
            for (shape, launch) in shapes(device) {
                let (mut a, mut b, mut c) = (vec![7u32; la], vec![7u64; lb], vec![7u8; lc]);
                outputs::three_outputs::launch(launch, &x, &mut a, &mut b, &mut c).unwrap();
                let m = la.min(lb).min(lc);
                let what = format!("three_outputs {la}/{lb}/{lc}, {shape} on {}", device.name());
                check(&a, &vec![7; la], 0, m, |i| x[i].wrapping_add(1), &what);
                check(&b, &vec![7; lb], 0, m, |i| x[i] as u64 * 3, &what);
                check(&c, &vec![7; lc], 0, m, |i| i as u8, &what);
            }
        }
    }
}

pub fn tuple_of_four_output_views_matches_cpu(device: &Device) {
    let init = |len: usize, k: i32| -> Vec<i32> {
        (0..len as i32)
            .map(|j| j.wrapping_mul(3 + k).wrapping_sub(7 * k))
            .collect()
    };
    for start in [0usize, 1, 3] {
        for n in 0..=9usize {
            for [la, lb, lc] in unequal(n) {
                let ld = start + n + 1;
                let lens = [start + la, start + lb, start + lc, ld];
                for (shape, launch) in shapes(device) {
                    let before: Vec<Vec<i32>> = lens
                        .iter()
                        .enumerate()
                        .map(|(k, &l)| init(l, k as i32))
                        .collect();
                    let [mut a, mut b, mut c, mut d] = [0, 1, 2, 3].map(|k| before[k].clone());
                    outputs::four_outputs::launch(
                        launch,
                        start as u32,
                        &mut a,
                        &mut b,
                        &mut c,
                        &mut d,
                    )
                    .unwrap();
                    let m = lens.iter().min().unwrap() - start;
                    let what = format!("four_outputs from {start}, {lens:?}, {shape}");
                    let old = |k: usize, i: usize| before[k][start + i];
                    check(
                        &a,
                        &before[0],
                        start,
                        m,
                        |i| old(0, i).wrapping_add(old(1, i)),
                        &what,
                    );
                    check(
                        &b,
                        &before[1],
                        start,
                        m,
                        |i| old(1, i).wrapping_sub(old(2, i)),
                        &what,
                    );
                    check(&c, &before[2], start, m, |i| old(2, i) ^ old(3, i), &what);
                    check(
                        &d,
                        &before[3],
                        start,
                        m,
                        |i| old(3, i).wrapping_add(i as i32),
                        &what,
                    );
                }
            }
        }
    }
}

pub fn wide_update_with_three_inputs_matches_cpu(device: &Device) {
    let s = -1.25f32;
    let (b, c, d) = (
        super::floats(64, 31),
        super::floats(64, 32),
        super::floats(64, 33),
    );
    let y0 = super::floats(64, 34);
    for n in 0..=9usize {
        for y_res in (0..16).step_by(4) {
            // Inputs aligned like y, and each of them in turn at another offset; then all longer.
            for (rb, rc, rd, extra) in [
                (y_res, y_res, y_res, 0),
                ((y_res + 4) % 16, y_res, y_res, 0),
                (y_res, (y_res + 8) % 16, y_res, 1),
                (y_res, y_res, (y_res + 12) % 16, 2),
                (y_res, y_res, y_res, 5),
            ] {
                let (ob, oc, od) = (at_residue(&b, rb), at_residue(&c, rc), at_residue(&d, rd));
                let (bs, cs, ds) = (&b[ob..ob + n + extra], &c[oc..oc + n], &d[od..od + n + 1]);
                let oy = at_residue(&y0, y_res);
                for (shape, launch) in shapes(device) {
                    let mut y = y0.clone();
                    outputs::update_three_inputs::launch(launch, s, bs, cs, ds, &mut y[oy..oy + n])
                        .unwrap();
                    let want = |i: usize| y0[oy + i] + bs[i] + s * cs[i] - ds[i];
                    let what = format!("update_three_inputs len {n}, y at +{y_res}, inputs at +{rb} +{rc} +{rd}, {shape}");
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    check(&bits(&y), &bits(&y0), oy, n, |i| want(i).to_bits(), &what);
                }
            }
        }
    }
}

pub fn wide_map_to_three_outputs_matches_cpu(device: &Device) {
    let (x, y) = (bytes(96, 1), bytes(96, 2));
    let before = [bytes(96, 3), bytes(96, 4), bytes(96, 5)];
    for n in BYTE_LENS {
        for res in 0..16 {
            // Outputs and inputs aligned alike (with equal and unequal lengths), then one output
            // or one input at another offset (element by element).
            for (rq, rr, rx, lens) in [
                (res, res, res, [n, n, n]),
                (res, res, res, unequal(n)[1]),
                (res, res, res, unequal(n)[2]),
                ((res + 1) % 16, res, res, unequal(n)[3]),
                (res, (res + 8) % 16, res, [n, n, n]),
                (res, res, (res + 3) % 16, [n, n + 1, n]),
            ] {
                let at = [
                    at_residue(&before[0], res),
                    at_residue(&before[1], rq),
                    at_residue(&before[2], rr),
                ];
                let (ox, oy) = (at_residue(&x, rx), at_residue(&y, res));
                let (xs, ys) = (&x[ox..ox + n + 6], &y[oy..oy + n + 6]);
                for (shape, launch) in shapes(device) {
                    let [mut p, mut q, mut r] = before.clone();
                    outputs::map_three_outputs::launch(
                        launch,
                        xs,
                        ys,
                        &mut p[at[0]..at[0] + lens[0]],
                        &mut q[at[1]..at[1] + lens[1]],
                        &mut r[at[2]..at[2] + lens[2]],
                    )
                    .unwrap();
                    let m = lens.iter().copied().min().unwrap();
                    let what = format!(
                        "map_three_outputs {lens:?} at +{res} +{rq} +{rr}, x at +{rx}, {shape}"
                    );
                    check(
                        &p,
                        &before[0],
                        at[0],
                        m,
                        |i| xs[i].wrapping_add(ys[i]),
                        &what,
                    );
                    check(&q, &before[1], at[1], m, |i| xs[i] ^ ys[i], &what);
                    check(
                        &r,
                        &before[2],
                        at[2],
                        m,
                        |i| xs[i].wrapping_sub(ys[i]),
                        &what,
                    );
                }
            }
        }
    }
}

pub fn wide_update_of_two_outputs_matches_cpu(device: &Device) {
    let (x, y, z) = (bytes(96, 6), bytes(96, 7), bytes(96, 8));
    let before = [bytes(96, 9), bytes(96, 10)];
    for n in BYTE_LENS {
        for res in 0..16 {
            for (rq, rz, lens) in [
                (res, res, [n, n]),
                (res, res, [n + 3, n]),
                (res, res, [n, n + 7]),
                ((res + 5) % 16, res, [n, n]),
                (res, (res + 2) % 16, [n + 1, n]),
            ] {
                let at = [at_residue(&before[0], res), at_residue(&before[1], rq)];
                let (ox, oy, oz) = (at_residue(&x, res), at_residue(&y, res), at_residue(&z, rz));
                let (xs, ys, zs) = (&x[ox..ox + n + 7], &y[oy..oy + n + 7], &z[oz..oz + n + 7]);
                for (shape, launch) in shapes(device) {
                    let [mut p, mut q] = before.clone();
                    outputs::update_two_outputs::launch(
                        launch,
                        xs,
                        ys,
                        zs,
                        &mut p[at[0]..at[0] + lens[0]],
                        &mut q[at[1]..at[1] + lens[1]],
                    )
                    .unwrap();
                    let m = lens[0].min(lens[1]);
                    let what =
                        format!("update_two_outputs {lens:?} at +{res} +{rq}, z at +{rz}, {shape}");
                    let old = |k: usize, i: usize| before[k][at[k] + i];
                    check(
                        &p,
                        &before[0],
                        at[0],
                        m,
                        |i| old(0, i).wrapping_add(xs[i] ^ ys[i]),
                        &what,
                    );
                    check(
                        &q,
                        &before[1],
                        at[1],
                        m,
                        |i| (old(1, i) ^ zs[i]).wrapping_add(1),
                        &what,
                    );
                }
            }
        }
    }
}
