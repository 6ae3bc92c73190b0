//! `bench_report OUTDIR MACHINE DATE LOG...`: the ratio lines of every benchmark log into
//! OUTDIR/BENCHMARKS.md (each ratio of each invocation, the worst, the goal and whether it is
//! met) and OUTDIR/benchmarks.png (the worst of each, as offload's speed relative to its
//! reference). A log's name ends in `-N.log`, N the invocation it belongs to (from 1). Text is
//! drawn with a TrueType font (`BENCH_FONT`, default DejaVu Sans).

use offload_bench_report::{register_sans_serif, Goal, Measure, Row, Table};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::error::Error;
use std::fmt::Write as _;

type Res<T> = Result<T, Box<dyn Error>>;

/// The invocation (from 0) that a log named `…-N.log` belongs to.
fn invocation_of(path: &str) -> Res<usize> {
    let stem = path.strip_suffix(".log").unwrap_or(path);
    let n = stem
        .rsplit('-')
        .next()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .ok_or_else(|| {
            format!("{path}: the name does not end in -N.log (N the invocation, from 1)")
        })?;
    Ok(n - 1)
}

fn goal_text(goal: Goal) -> String {
    match goal {
        Goal::AtMost(g) => format!("≤ {g:.2}"),
        Goal::AtLeast(g) => format!("≥ {g:.2}"),
        Goal::None => "—".into(),
    }
}

fn markdown(table: &Table, machine: &str, date: &str) -> String {
    let n = table.invocations;
    let runs = if table.rows.iter().all(Row::complete) {
        format!("{n} invocations of every benchmark")
    } else {
        format!(
            "{n} invocations, some benchmarks repeated in the later ones only (*not run* marks a \
             figure an invocation did not measure)"
        )
    };
    let mut md = format!(
        "# Every benchmark against its same-run reference\n\n{machine}, {date}, {runs} \
         (`scripts/bench`). Each figure is a ratio to a reference measured in the same process: \
         *time* ratios are offload's time over the reference's (below 1 is faster), *speed* \
         ratios are offload's bandwidth or throughput over the reference's (above 1 is faster). \
         *worst* is the worst invocation, and the goal is judged on it. The plot shows every \
         worst figure as offload's speed relative to its reference.\n\n\
         ![every benchmark](benchmarks.png)\n\n"
    );
    let (goals, met) = table.rows.iter().fold((0, 0), |(g, m), r| match r.met() {
        Some(ok) => (g + 1, m + ok as usize),
        None => (g, m),
    });
    let _ = writeln!(md, "{met} of {goals} goals met in the worst invocation.\n");
    md.push_str("| benchmark | figure | reference | kind |");
    for i in 1..=n {
        let _ = write!(md, " run {i} |");
    }
    md.push_str(" worst | goal | met |\n|---|---|---|---|");
    for _ in 0..n + 3 {
        md.push_str("---|");
    }
    md.push('\n');
    for row in &table.rows {
        let kind = match row.measure {
            Measure::Time => "time",
            Measure::Speed => "speed",
        };
        let _ = write!(
            md,
            "| {} | {} | {} | {kind} |",
            row.bench, row.what, row.reference
        );
        for v in &row.values {
            match v {
                Some(v) => {
                    let _ = write!(md, " {v:.3} |");
                }
                None => md.push_str(" not run |"),
            }
        }
        let met = match row.met() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(
            md,
            " **{:.3}** | {} | {met} |",
            row.worst(),
            goal_text(row.goal)
        );
    }
    md
}

fn plot(table: &Table, machine: &str, date: &str, png: &str) -> Res<()> {
    register_sans_serif("BENCH_FONT")?;

    let rows: Vec<&Row> = table.rows.iter().collect();
    let count = rows.len().max(1);
    let height = 150 + 19 * count as u32;
    let root = BitMapBackend::new(png, (1400, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (area, legend_area) = root.split_vertically(height - 30);
    let speed = |r: &Row| r.worst_relative_speed();
    // Where the goal lies on the relative-speed axis.
    let goal_speed = |r: &Row| match r.goal {
        Goal::AtMost(g) if r.measure == Measure::Time => Some(1.0 / g),
        Goal::AtLeast(g) if r.measure == Measure::Speed => Some(g),
        _ => None,
    };
    let right = rows
        .iter()
        .map(|r| speed(r).max(goal_speed(r).unwrap_or(0.0)))
        .fold(1.2, f64::max)
        .min(3.0)
        * 1.05;
    let mut chart = ChartBuilder::on(&area)
        .caption(
            format!(
                "offload's speed relative to its same-run reference (worst of {}), {machine}, {date}",
                table.invocations
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(560)
        .build_cartesian_2d(0f64..right, 0f64..count as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("relative speed (1 = as fast as the reference; bars end at 3)")
        .label_style(("sans-serif", 14))
        .draw()?;
    let color = |r: &Row| match r.met() {
        Some(true) => GREEN.mix(0.6),
        Some(false) => RED.mix(0.7),
        None => BLUE.mix(0.45),
    };
    // Top to bottom in the table's order.
    let y_of = |i: usize| (count - 1 - i) as f64;
    chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
        let y = y_of(i);
        Rectangle::new(
            [(0.0, y + 0.15), (speed(r).min(right), y + 0.85)],
            color(r).filled(),
        )
    }))?;
    chart.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
        let g = goal_speed(r)?;
        let y = y_of(i);
        Some(PathElement::new(
            [(g, y + 0.02), (g, y + 0.98)],
            BLACK.stroke_width(2),
        ))
    }))?;
    chart.draw_series(LineSeries::new(
        [(1.0, 0.0), (1.0, count as f64)],
        BLACK.mix(0.5).stroke_width(1),
    ))?;
    let label = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, r) in rows.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(0.0, y_of(i) + 0.5));
        let text = format!("{}: {} / {}", r.bench, r.what, r.reference);
        let text: String = if text.chars().count() > 86 {
            text.chars().take(85).chain(['…']).collect()
        } else {
            text
        };
        area.draw(&Text::new(text, (x - 6, y), label.clone()))?;
    }
    let legend = ("sans-serif", 14).into_font().color(&BLACK);
    for (k, (what, c)) in [
        ("goal met", GREEN.mix(0.6)),
        ("goal not met", RED.mix(0.7)),
        ("no goal", BLUE.mix(0.45)),
        ("| goal", BLACK.mix(1.0)),
    ]
    .into_iter()
    .enumerate()
    {
        let x = 20 + 150 * k as i32;
        let y = 12;
        if k < 3 {
            legend_area.draw(&Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()))?;
        }
        legend_area.draw(&Text::new(what, (x + 20, y - 8), legend.clone()))?;
    }
    root.present()?;
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        return Err("usage: bench_report OUTDIR MACHINE DATE LOG... (LOG named …-N.log)".into());
    }
    let (out, machine, date, paths) = (&args[0], &args[1], &args[2], &args[3..]);
    let mut logs = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        logs.push((invocation_of(path)?, path.as_str(), text));
    }
    let invocations = logs.iter().map(|l| l.0 + 1).max().unwrap_or(0);
    let table = Table::from_logs(
        invocations,
        logs.iter().map(|(i, p, t)| (*i, *p, t.as_str())),
    )?;
    if table.rows.is_empty() {
        return Err("no ratio lines in the logs".into());
    }
    std::fs::write(
        format!("{out}/BENCHMARKS.md"),
        markdown(&table, machine, date),
    )?;
    let png = format!("{out}/benchmarks.png");
    plot(&table, machine, date, &png)?;
    println!(
        "wrote {out}/BENCHMARKS.md and {png}: {} figures from {invocations} invocations",
        table.rows.len()
    );
    Ok(())
}
