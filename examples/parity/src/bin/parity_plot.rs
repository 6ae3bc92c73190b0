//! The picture of the benchmarks: `parity_plot OUTDIR MACHINE DATE CSV...` reads the CSVs that
//! `parity` wrote (one per invocation), and writes OUTDIR/PARITY.md (every ratio of offload's
//! device time to CUDA C's, per invocation, and the worst) and OUTDIR/parity.png (the worst
//! ratio of each kernel, f32 and f64). Text is drawn with a system TrueType font
//! (`PARITY_FONT`, default DejaVu Sans).

use offload_bench_report::register_sans_serif;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;

type Res<T> = Result<T, Box<dyn Error>>;

/// One CSV line: the kernel, the element type, offload's ratios (default launch, CUDA C's launch
/// shape) and the bandwidth of offload's default launch in GB/s.
struct Measured {
    kernel: String,
    ty: String,
    default: f64,
    matched: f64,
    gbs: f64,
}

fn read(path: &str) -> Res<Vec<Measured>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut rows = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 7 {
            return Err(format!("{path}: expected 7 fields in {line:?}").into());
        }
        let num = |i: usize| -> Res<f64> {
            f[i].parse::<f64>()
                .map_err(|e| format!("{path}: {:?}: {e}", f[i]).into())
        };
        let (bytes, offload, matched, cuda) = (num(2)?, num(3)?, num(4)?, num(5)?);
        rows.push(Measured {
            kernel: f[0].to_string(),
            ty: f[1].to_string(),
            default: offload / cuda,
            matched: matched / cuda,
            gbs: bytes / (offload * 1e-3) / 1e9,
        });
    }
    Ok(rows)
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        return Err("usage: parity_plot OUTDIR MACHINE DATE CSV...".into());
    }
    let (out, machine, date, csvs) = (&args[0], &args[1], &args[2], &args[3..]);
    let runs: Vec<Vec<Measured>> = csvs.iter().map(|p| read(p)).collect::<Res<_>>()?;

    // (kernel, type) in the order of the first run → worst ratio over the runs.
    let order: Vec<(String, String)> = runs[0]
        .iter()
        .map(|m| (m.kernel.clone(), m.ty.clone()))
        .collect();
    let mut worst: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut md = format!(
        "# offload against CUDA C\n\n{machine}, {date}, {} invocations of `parity` (`scripts/parity`). \
         Each figure is offload's device time over nvcc's (`-O3 -arch=sm_90`) for the same \
         algorithm on the same data, the median of 15 launches timed with device events, the \
         variants interleaved; below 1 is faster than CUDA C. *default*: offload's default launch \
         (`Launch::on(gpu)`); *CUDA shape*: the launch shape of the CUDA C version (one thread per \
         element, blocks of 256). Outputs were compared with CUDA C's in every run.\n\n",
        runs.len()
    );
    md.push_str("| kernel | type |");
    for i in 1..=runs.len() {
        let _ = write!(md, " default, run {i} | CUDA shape, run {i} |");
    }
    md.push_str(" worst default | GB/s (run 1) |\n|---|---|");
    for _ in 0..runs.len() * 2 + 2 {
        md.push_str("---|");
    }
    md.push('\n');
    for key in &order {
        let _ = write!(md, "| {} | {} |", key.0, key.1);
        let mut w: f64 = 0.0;
        let mut gbs = 0.0;
        for (r, run) in runs.iter().enumerate() {
            let m = run
                .iter()
                .find(|m| (&m.kernel, &m.ty) == (&key.0, &key.1))
                .ok_or_else(|| format!("{} {} missing from {}", key.0, key.1, csvs[r]))?;
            let _ = write!(md, " {:.3} | {:.3} |", m.default, m.matched);
            w = w.max(m.default);
            if r == 0 {
                gbs = m.gbs;
            }
        }
        let _ = writeln!(md, " **{w:.3}** | {gbs:.0} |");
        worst.insert(key.clone(), w);
    }
    let mut kernels: Vec<&str> = Vec::new();
    for (k, _) in &order {
        if !kernels.contains(&k.as_str()) {
            kernels.push(k);
        }
    }
    std::fs::write(format!("{out}/PARITY.md"), md)?;

    register_sans_serif("PARITY_FONT")?;

    let png = format!("{out}/parity.png");
    let root = BitMapBackend::new(&png, (1200, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = worst.values().cloned().fold(1.2, f64::max) * 1.08;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "offload / CUDA C device time (worst of {} runs), {machine}, {date}",
                runs.len()
            ),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..kernels.len() as f64, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|_| String::new())
        .y_desc("time ratio (lower is faster)")
        .label_style(("sans-serif", 15))
        .draw()?;
    for (ty, offset, color) in [("f32", 0.12, BLUE.mix(0.7)), ("f64", 0.5, RED.mix(0.7))] {
        let bars = kernels.iter().enumerate().filter_map(|(i, k)| {
            let v = *worst.get(&(k.to_string(), ty.to_string()))?;
            let x = i as f64 + offset;
            Some(Rectangle::new([(x, 0.0), (x + 0.36, v)], color.filled()))
        });
        chart
            .draw_series(bars)?
            .label(ty)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    for (level, style) in [
        (1.0, BLACK.stroke_width(2)),
        (1.1, BLACK.mix(0.4).stroke_width(1)),
    ] {
        chart.draw_series(LineSeries::new(
            [(0.0, level), (kernels.len() as f64, level)],
            style,
        ))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    // Kernel names under their pair of bars, placed in pixels (the axis labels of plotters sit
    // at its own choice of positions).
    let name_style =
        ("sans-serif", 15)
            .into_font()
            .color(&BLACK)
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ));
    for (i, k) in kernels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(k.to_string(), (x, y + 10), name_style.clone()))?;
    }
    root.present()?;
    println!("wrote {out}/PARITY.md and {png}");
    Ok(())
}
