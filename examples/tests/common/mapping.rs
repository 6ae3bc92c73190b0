//! Data mapping checks shared by the host and GPU suites: regions, map kinds, `DeviceVec`, the
//! transfer counters. Bytes are counted with this thread's trace counters (other tests running
//! meanwhile do not disturb them). On a GPU every map kind moves exactly its bytes; on the host
//! backend mapping is a no-op, so nothing is counted and only the results are checked.

use offload::trace::{thread_counters, Counters};
use offload::{alloc, from, present, to, Device, DeviceVec, Error, Launch};
use offload_examples::kernels;
use offload_examples::{jacobi, reference};

use super::{floats, same_bits};

fn moved<R>(f: impl FnOnce() -> R) -> (R, Counters) {
    let before = thread_counters();
    let r = f();
    (r, thread_counters() - before)
}

const N: usize = 1 << 16;
const BYTES: u64 = (N * 4) as u64;

/// The acceptance test: 100 launches inside a region move x and y once each way they
/// need (x in, y in and back); the same loop without a region moves them every launch. Both give
/// the CPU loop's bits.
pub fn region_loop_moves_each_array_once(device: &Device) {
    let x = floats(N, 21);
    let y0 = floats(N, 22);
    let mut expected = y0.clone();
    for _ in 0..100 {
        reference::saxpy(0.5, &x, &mut expected);
    }
    let mut y = y0.clone();
    let ((), in_region) = moved(|| {
        offload::region_on(device, |r| {
            let xd = r.to(&x)?;
            let mut yd = r.tofrom(&mut y)?;
            for _ in 0..100 {
                kernels::saxpy::launch(Launch::on(device), 0.5, &xd, &mut yd)?;
            }
            Ok(())
        })
        .unwrap()
    });
    assert!(same_bits(&y, &expected), "region loop on {}", device.name());
    let mut y = y0.clone();
    let ((), per_launch) = moved(|| {
        for _ in 0..100 {
            kernels::saxpy::launch(Launch::on(device), 0.5, &x, &mut y).unwrap();
        }
    });
    assert!(same_bits(&y, &expected), "plain loop on {}", device.name());
    assert_eq!((in_region.launches, per_launch.launches), (100, 100));
    if device.is_gpu() {
        assert_eq!(in_region.bytes_to_device, 2 * BYTES, "x and y go in once");
        assert_eq!(in_region.bytes_from_device, BYTES, "y comes back once");
        assert_eq!((in_region.maps, in_region.unmaps), (2, 2));
        assert_eq!(per_launch.bytes_to_device, 100 * 2 * BYTES);
        assert_eq!(per_launch.bytes_from_device, 100 * BYTES);
    } else {
        assert_eq!(in_region.bytes_to_device + per_launch.bytes_to_device, 0);
        assert_eq!(
            in_region.bytes_from_device + per_launch.bytes_from_device,
            0
        );
    }
}

/// Plain `&x` arguments inside a region find x present; nested regions only raise counts.
pub fn plain_arguments_and_nested_regions_find_data_present(device: &Device) {
    let x = floats(N, 23);
    let mut y = vec![0.0f32; N];
    let ((), counted) = moved(|| {
        offload::region_on(device, |outer| {
            let _xd = outer.to(&x)?;
            let mut yd = outer.from(&mut y)?;
            offload::region_on(device, |inner| {
                let x_again = inner.to(&x)?;
                assert_eq!(inner.present(&x[..N / 2])?.len(), N / 2);
                kernels::saxpy::launch(Launch::on(device), 1.0, &x_again, &mut yd)?;
                kernels::saxpy::launch(Launch::on(device), 1.0, present(&x), &mut yd)
            })?;
            kernels::saxpy::launch(Launch::on(device), 1.0, &x, &mut yd)
        })
        .unwrap()
    });
    let mut expected = vec![0.0f32; N];
    for _ in 0..3 {
        reference::saxpy(1.0, &x, &mut expected);
    }
    assert!(same_bits(&y, &expected), "on {}", device.name());
    if device.is_gpu() {
        assert_eq!(counted.bytes_to_device, BYTES, "x once; `from` y never");
        assert_eq!(counted.bytes_from_device, BYTES, "y once");
        assert_eq!(counted.present_hits, 4, "inner maps, present(&x), plain &x");
    }
}

/// `from` starts from zero and copies back; `alloc` and `to(&mut ..)` leave host data as it was.
pub fn map_kinds_move_only_what_they_say(device: &Device) {
    let x = floats(N, 24);
    let y0 = floats(N, 25);
    let mut expected = vec![0.0f32; N];
    reference::saxpy(2.0, &x, &mut expected);
    let mut y = y0.clone();
    let (result, counted) =
        moved(|| kernels::saxpy::launch(Launch::on(device), 2.0, &x, from(&mut y)));
    result.unwrap();
    assert!(same_bits(&y, &expected), "from on {}", device.name());
    for scratch in [true, false] {
        let mut y = y0.clone();
        let (result, kept) = moved(|| {
            if scratch {
                kernels::saxpy::launch(Launch::on(device), 2.0, to(&x), alloc(&mut y))
            } else {
                kernels::saxpy::launch(Launch::on(device), 2.0, &x, to(&mut y))
            }
        });
        result.unwrap();
        assert!(same_bits(&y, &y0), "host data kept (scratch: {scratch})");
        if device.is_gpu() {
            assert_eq!(kept.bytes_from_device, 0);
            let copied_in = if scratch { BYTES } else { 2 * BYTES };
            assert_eq!(kept.bytes_to_device, copied_in);
        }
    }
    if device.is_gpu() {
        assert_eq!(
            (counted.bytes_to_device, counted.bytes_from_device),
            (BYTES, BYTES)
        );
    }
}

/// A `DeviceVec` is passed as is (no transfer) and round-trips its data.
pub fn device_vec_round_trip_without_transfers(device: &Device) {
    let x = floats(N, 26);
    let y0 = floats(N, 27);
    let mut expected = y0.clone();
    reference::saxpy(3.0, &x, &mut expected);
    reference::saxpy(3.0, &x, &mut expected);
    let xd = DeviceVec::from_slice(device, &x).unwrap();
    let mut yd = DeviceVec::from_slice(device, &y0).unwrap();
    let ((), counted) = moved(|| {
        // No device named: the launch runs where the data lives.
        kernels::saxpy(3.0, &xd, &mut yd).unwrap();
        kernels::saxpy(3.0, &xd, &mut yd).unwrap();
    });
    assert_eq!(counted.bytes_to_device + counted.bytes_from_device, 0);
    assert_eq!(offload::last_launch().unwrap().device, device.name());
    assert!(same_bits(&yd.to_vec().unwrap(), &expected));
    let mut back = vec![0.0f32; N];
    yd.copy_from_host(&x).unwrap();
    yd.copy_to_host(&mut back).unwrap();
    assert!(same_bits(&back, &x));
    assert!(matches!(
        yd.copy_to_host(&mut back[1..]),
        Err(Error::LengthMismatch { .. })
    ));
    let zeros = DeviceVec::<f64>::zeroed(device, 3).unwrap();
    assert_eq!(zeros.to_vec().unwrap(), [0.0; 3]);
}

/// Part of a `DeviceVec` (a halo row) goes each way, the rest untouched; past the end is an
/// error that copies nothing.
pub fn device_vec_copies_part(device: &Device) {
    let x = floats(N, 28);
    let mut xd = DeviceVec::from_slice(device, &x).unwrap();
    let row = floats(37, 29);
    let mut expected = x.clone();
    expected[N - 40..N - 3].copy_from_slice(&row);
    xd.copy_from_host_at(N - 40, &row).unwrap();
    assert!(same_bits(&xd.to_vec().unwrap(), &expected));
    let mut part = vec![0.0f32; 37];
    xd.copy_to_host_at(N - 40, &mut part).unwrap();
    assert!(same_bits(&part, &row));
    xd.copy_to_host_at(0, &mut part).unwrap();
    assert!(same_bits(&part, &x[..37]));

    let e = xd.copy_from_host_at(N - 36, &row).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "DeviceVec::copy_from_host_at: elements {}..{} are out of range: it holds {N}",
            N - 36,
            N + 1
        )
    );
    let mut untouched = vec![7.0f32; 2];
    let e = xd.copy_to_host_at(usize::MAX, &mut untouched).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { len: N, .. }), "{e}");
    assert_eq!(untouched, [7.0; 2]);
    assert!(same_bits(&xd.to_vec().unwrap(), &expected));
    xd.copy_from_host_at(N, &[]).unwrap();
}

/// Jacobi sweeps give the CPU's bits, in a region or launch by launch.
pub fn jacobi_matches_cpu_with_and_without_region(device: &Device) {
    let (w, h, sweeps) = (67, 45, 20);
    let mut expected = jacobi::initial_grid(w, h);
    jacobi::on_cpu(w, h, &mut expected, sweeps);
    let mut grid = jacobi::initial_grid(w, h);
    jacobi::in_region(device, w, h, &mut grid, sweeps).unwrap();
    assert!(
        same_bits(&grid, &expected),
        "in a region on {}",
        device.name()
    );
    let mut grid = jacobi::initial_grid(w, h);
    jacobi::per_launch(device, w, h, &mut grid, sweeps).unwrap();
    assert!(
        same_bits(&grid, &expected),
        "per launch on {}",
        device.name()
    );
}

/// Eight threads map a shared input (raising and lowering one count) and their own outputs.
pub fn regions_on_eight_threads(device: &Device) {
    let x = floats(N, 28);
    std::thread::scope(|s| {
        for t in 0..8 {
            let x = &x;
            s.spawn(move || {
                let y0 = floats(N, 100 + t);
                let mut expected = y0.clone();
                let mut y = y0.clone();
                offload::region_on(device, |r| {
                    let xd = r.to(x)?;
                    let mut yd = r.tofrom(&mut y)?;
                    for _ in 0..10 {
                        reference::saxpy(1.5, x, &mut expected);
                        kernels::saxpy::launch(Launch::on(device), 1.5, &xd, &mut yd)?;
                    }
                    Ok(())
                })
                .unwrap();
                assert!(same_bits(&y, &expected), "thread {t}");
            });
        }
    });
}

/// GPU only: overlapping maps and absent `present` data are errors, and nothing leaks.
pub fn overlapping_and_absent_maps_are_errors(device: &Device) {
    let x = floats(N, 29);
    let mut y = vec![0.0f32; N];
    let result = offload::region_on(device, |r| {
        let _head = r.to(&x[..N / 2])?;
        let overlap = r.to(&x[N / 4..]).map(|m| m.len());
        assert!(
            matches!(overlap, Err(Error::MapOverlap { .. })),
            "{overlap:?}"
        );
        let e = kernels::saxpy::launch(Launch::on(device), 1.0, &x[N / 4..], &mut y).unwrap_err();
        assert!(e.to_string().contains("partially overlap"), "{e}");
        kernels::saxpy::launch(Launch::on(device), 1.0, present(&x[N / 2..]), &mut y)
    });
    let e = result.unwrap_err();
    assert!(matches!(e, Error::NotPresent { .. }), "{e}");
    assert!(e.to_string().contains("not present"), "{e}");
}

/// GPU only: with device memory filled, a launch whose second array does not fit fails with
/// `OutOfMemory`, releases the first one's copy, and leaves host data untouched; a region's
/// failed map does the same. The device stays usable.
pub fn out_of_memory_while_mapping_leaves_host_data(device: &Device) {
    let mut filler = Vec::new();
    for chunk in [4usize << 30, 256 << 20] {
        while let Ok(v) = DeviceVec::<u8>::zeroed(device, chunk) {
            filler.push(v);
        }
    }
    // Now less than 256 MiB is free; give one chunk back: x (256 MiB) fits, y (512 MiB) not.
    filler.pop();
    let n = (256 << 20) / 4;
    let x = vec![1.0f32; n];
    let mut y = vec![2.0f32; 2 * n];
    let (result, counted) = moved(|| kernels::saxpy::launch(Launch::on(device), 1.0, &x, &mut y));
    let e = result.unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    assert_eq!(counted.maps, 1, "x was mapped");
    assert_eq!(counted.unmaps, 1, "and released");
    assert!(y.iter().all(|&v| v == 2.0), "host data untouched");
    let (head, tail) = y.split_at_mut(n);
    let region = offload::region_on(device, |r| {
        let mut yd = r.tofrom(head)?;
        yd.update_to(|host| host.fill(5.0))?;
        r.from(tail).map(drop)
    });
    assert!(matches!(region, Err(Error::OutOfMemory { .. })));
    drop(filler);
    kernels::saxpy::launch(Launch::on(device), 1.0, &x, &mut y[..n]).unwrap();
    assert!(
        y[..n].iter().all(|&v| v == 6.0),
        "no copy back from the failed region"
    );
    assert!(y[n..].iter().all(|&v| v == 2.0));
}

/// GPU only: with the trace on, sending unchanged bytes again is counted as redundant.
pub fn redundant_copies_are_reported(device: &Device) {
    offload::trace::enable();
    let x = floats(1024, 30);
    let mut y = vec![0.0f32; 1024];
    let ((), counted) = moved(|| {
        for _ in 0..3 {
            kernels::saxpy::launch(Launch::on(device), 1.0, &x, from(&mut y)).unwrap();
        }
    });
    // x went three times unchanged; y was never sent.
    assert_eq!(counted.redundant_copies, 2);
}
