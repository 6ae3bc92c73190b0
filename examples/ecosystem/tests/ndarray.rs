//! ndarray views as kernel arguments (`offload::nd`): results equal ndarray's own on the CPU for
//! 1, 2 and 3 dimensions and many launch shapes (1D and 2D grids), on the host backend and on a
//! GPU (skipped visibly without one; a failure with `OFFLOAD_REQUIRE_GPU=1`); views that are not
//! contiguous are errors that leave the output untouched.

use ndarray::{s, Array, Array1, Array2, Array3, ShapeBuilder};
use offload::{Device, Error, Launch};
use offload_ecosystem_examples::kernels::arrays;

mod common;

fn gpu(test: &str) -> Option<Device> {
    common::gpu_or_skip(
        test,
        offload::devices().iter().find(|d| d.is_gpu()),
        "no GPU",
    )
}

/// Launch shapes: the default, 1D grids of several sizes, 2D grids, and a single thread.
fn launches(device: &Device) -> Vec<Launch<'_>> {
    vec![
        Launch::on(device),
        Launch::on(device).grid(3).block(64),
        Launch::on(device).grid(7).block(5),
        Launch::on(device).grid((4, 3)).block((16, 8)),
        Launch::on(device).grid((2, 2, 2)).block((4, 4, 2)),
        Launch::on(device).grid(1).block(1),
    ]
}

fn all_shapes_match_ndarray(device: &Device) {
    for (rows, cols) in [(1, 1), (37, 53), (64, 128), (3, 1000), (1000, 3)] {
        let a = Array2::from_shape_fn((rows, cols), |(r, c)| (r * 131 + c * 7) as f32 * 0.25 - 9.0);
        let bias = Array1::from_shape_fn(cols, |c| c as f32 * -0.5);
        let expected = &a * 1.5 + &bias;
        let a64 = a.mapv(|v| v as f64 + 0.125);
        for launch in launches(device) {
            let mut out = Array2::<f32>::zeros((rows, cols));
            arrays::scale_add_bias::launch(launch, 1.5, a.view(), bias.view(), out.view_mut())
                .unwrap();
            assert_eq!(
                out,
                expected,
                "scale_add_bias {rows}x{cols} on {}",
                device.name()
            );

            let mut t = Array2::<f64>::zeros((cols, rows));
            arrays::transpose::launch(launch, a64.view(), t.view_mut()).unwrap();
            assert_eq!(t, a64.t(), "transpose {rows}x{cols} on {}", device.name());
        }
    }
    for dim in [(2, 3, 4), (5, 17, 9), (1, 64, 33)] {
        let a = Array3::from_shape_fn(dim, |(i, j, k)| (i + j * k) as f64 * 0.5);
        let expected = Array3::from_shape_fn(dim, |(i, j, k)| {
            a[[i, j, k]] + (10000 * i + 100 * j + k) as f64
        });
        for launch in launches(device) {
            let mut out = Array3::<f64>::zeros(dim);
            arrays::add_coordinates::launch(launch, a.view(), out.view_mut()).unwrap();
            assert_eq!(
                out,
                expected,
                "add_coordinates {dim:?} on {}",
                device.name()
            );
        }
    }
    let a: Array1<u32> = (0..1001).collect();
    let mut out = Array1::<u32>::zeros(1001);
    arrays::reverse(a.view(), out.view_mut()).unwrap();
    assert_eq!(out, a.slice(s![..;-1]));
    // Queued on a stream too: the views stay borrowed for the scope.
    let mut queued = Array1::<u32>::zeros(1001);
    offload::scope(|sc| {
        let stream = sc.stream(device)?;
        arrays::reverse::enqueue(&stream, Launch::auto(), a.view(), queued.view_mut())
    })
    .unwrap();
    assert_eq!(queued, a.slice(s![..;-1]));
}

/// A transposed, strided or column-major view is `Err(InvalidArgument)` naming the parameter and
/// saying what to do; nothing runs and the output keeps its values.
fn views_that_are_not_contiguous_are_refused(device: &Device) {
    let a = Array2::from_shape_fn((6, 8), |(r, c)| (r * 8 + c) as f32);
    let bias = Array1::<f32>::ones(8);
    let column_major = Array::from_shape_vec((6, 8).f(), a.iter().copied().collect()).unwrap();
    let launch = Launch::on(device);
    for (name, view) in [
        ("transposed", a.t()),
        ("every other column", a.slice(s![.., ..;2])),
        ("column-major", column_major.view()),
    ] {
        let bias = bias.slice(s![..view.ncols()]);
        let mut out = Array2::<f32>::from_elem(view.dim(), 7.0);
        let result = arrays::scale_add_bias::launch(launch, 1.0, view, bias, out.view_mut());
        match result {
            Err(Error::InvalidArgument {
                argument: "a",
                reason,
                ..
            }) => {
                assert!(
                    reason.contains("not contiguous") && reason.contains("as_standard_layout"),
                    "{reason}"
                )
            }
            other => panic!("{name}: expected InvalidArgument for `a`, got {other:?}"),
        }
        assert!(
            out.iter().all(|&v| v == 7.0),
            "{name}: the output was written"
        );
    }
    let mut wide = Array2::<f32>::zeros((8, 12));
    let strided_out = wide.slice_mut(s![.., ..;2]);
    let strided_out = strided_out.reversed_axes();
    let result = arrays::scale_add_bias::launch(launch, 1.0, a.view(), bias.view(), strided_out);
    assert!(
        matches!(
            result,
            Err(Error::InvalidArgument {
                argument: "out",
                ..
            })
        ),
        "{result:?}"
    );
    // The contiguous copy it suggests works.
    let copy = a.t().as_standard_layout().into_owned();
    let mut out_t = Array2::<f32>::zeros((8, 6));
    arrays::scale_add_bias::launch(
        launch,
        1.0,
        copy.view(),
        Array1::<f32>::zeros(6).view(),
        out_t.view_mut(),
    )
    .unwrap();
    assert_eq!(out_t, a.t());
}

#[test]
fn array_views_on_the_host_backend() {
    let host = Device::host();
    all_shapes_match_ndarray(&host);
    views_that_are_not_contiguous_are_refused(&host);
}

#[test]
fn array_views_on_the_gpu() {
    let Some(gpu) = gpu("array_views_on_the_gpu") else {
        return;
    };
    all_shapes_match_ndarray(&gpu);
    views_that_are_not_contiguous_are_refused(&gpu);
}
