//! The ratios of several invocations of the benchmarks, one row per figure, in the order the
//! first log printed them, with the worst of the invocations.

use crate::{Goal, Measure, Ratio};

/// One figure over every invocation.
#[derive(Debug)]
pub struct Row {
    pub bench: String,
    pub what: String,
    pub reference: String,
    pub measure: Measure,
    pub goal: Goal,
    /// The ratio of each invocation, `None` where that invocation did not print it.
    pub values: Vec<Option<f64>>,
}

impl Row {
    /// The worst ratio over the invocations: the slowest time ratio or the lowest speed ratio.
    pub fn worst(&self) -> f64 {
        let values = self.values.iter().flatten().copied();
        match self.measure {
            Measure::Time => values.fold(f64::MIN, f64::max),
            Measure::Speed => values.fold(f64::MAX, f64::min),
        }
    }

    /// Whether every invocation printed this figure.
    pub fn complete(&self) -> bool {
        self.values.iter().all(Option::is_some)
    }

    /// The worst ratio as offload's speed over the reference's (above 1 is faster).
    pub fn worst_relative_speed(&self) -> f64 {
        match self.measure {
            Measure::Time => 1.0 / self.worst(),
            Measure::Speed => self.worst(),
        }
    }

    /// Whether the worst invocation meets the goal (`None`: no goal).
    pub fn met(&self) -> Option<bool> {
        self.goal.met_by(self.worst())
    }
}

#[derive(Debug)]
pub struct Table {
    pub invocations: usize,
    pub rows: Vec<Row>,
}

impl Table {
    /// The table of `invocations` runs, from `(invocation, log text)` pairs (invocations count
    /// from 0; several logs may belong to one invocation). A malformed ratio line is an error
    /// naming its log, and so is one figure printed twice in one invocation.
    pub fn from_logs<'a>(
        invocations: usize,
        logs: impl IntoIterator<Item = (usize, &'a str, &'a str)>,
    ) -> Result<Table, String> {
        let mut rows: Vec<Row> = Vec::new();
        for (invocation, name, text) in logs {
            if invocation >= invocations {
                return Err(format!(
                    "{name}: invocation {} of {invocations}",
                    invocation + 1
                ));
            }
            for line in text.lines() {
                let Some(parsed) = Ratio::parse(line) else {
                    continue;
                };
                let ratio = parsed.map_err(|e| format!("{name}: {e}"))?;
                let index = match rows.iter().position(|r| {
                    (&r.bench, &r.what, &r.reference)
                        == (&ratio.bench, &ratio.what, &ratio.reference)
                }) {
                    Some(i) => i,
                    None => {
                        rows.push(Row {
                            bench: ratio.bench.clone(),
                            what: ratio.what.clone(),
                            reference: ratio.reference.clone(),
                            measure: ratio.measure,
                            goal: ratio.goal,
                            values: vec![None; invocations],
                        });
                        rows.len() - 1
                    }
                };
                let row = &mut rows[index];
                if row.measure != ratio.measure {
                    return Err(format!(
                        "{name}: {} / {} is a {:?} ratio here and a {:?} ratio elsewhere",
                        ratio.bench, ratio.what, ratio.measure, row.measure
                    ));
                }
                let slot = &mut row.values[invocation];
                if slot.is_some() {
                    return Err(format!(
                        "{name}: {} / {} printed twice in invocation {}",
                        ratio.bench,
                        ratio.what,
                        invocation + 1
                    ));
                }
                *slot = Some(ratio.value);
                // Goals that depend on the run's own reference (microseconds above it) differ
                // between invocations: keep the strictest.
                row.goal = match (row.goal, ratio.goal) {
                    (Goal::AtMost(a), Goal::AtMost(b)) => Goal::AtMost(a.min(b)),
                    (Goal::AtLeast(a), Goal::AtLeast(b)) => Goal::AtLeast(a.max(b)),
                    (kept, _) => kept,
                };
            }
        }
        Ok(Table { invocations, rows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN1: &str = "device: H200\n\
        ratio\tlaunch_bench\tenqueue\tcuLaunchKernel\ttime\t1.2000\t<=1.1\n\
        ratio\tmapping\tcopy\tpinned cuMemcpy\tspeed\t0.9500\t>=0.9\n";
    const RUN2: &str = "ratio\tlaunch_bench\tenqueue\tcuLaunchKernel\ttime\t1.0500\t<=1.1\n\
        ratio\tmapping\tcopy\tpinned cuMemcpy\tspeed\t0.8800\t>=0.9\n\
        ratio\tplugins\tlaunch\tCUDA\ttime\t1.0100\t-\n";

    #[test]
    fn rows_keep_every_invocation_and_the_worst_is_the_slower_side() {
        let t = Table::from_logs(2, [(0, "a-1.log", RUN1), (1, "a-2.log", RUN2)]).unwrap();
        assert_eq!(t.rows.len(), 3);
        let enqueue = &t.rows[0];
        assert_eq!(enqueue.values, vec![Some(1.2), Some(1.05)]);
        assert_eq!(enqueue.worst(), 1.2);
        assert_eq!(enqueue.met(), Some(false));
        let copy = &t.rows[1];
        assert_eq!(copy.worst(), 0.88);
        assert_eq!(copy.met(), Some(false));
        assert!((copy.worst_relative_speed() - 0.88).abs() < 1e-12);
        let plugins = &t.rows[2];
        assert!(!plugins.complete());
        assert_eq!(plugins.met(), None);
    }

    #[test]
    fn a_figure_twice_in_one_invocation_or_a_bad_line_is_an_error() {
        let twice = format!("{RUN1}{RUN1}");
        let err = Table::from_logs(1, [(0, "b-1.log", twice.as_str())]).unwrap_err();
        assert!(err.contains("printed twice"), "{err}");
        let bad = "ratio\tx\ty\tz\ttime\tfast\t-\n";
        let err = Table::from_logs(1, [(0, "c-1.log", bad)]).unwrap_err();
        assert!(err.starts_with("c-1.log"), "{err}");
        let err = Table::from_logs(1, [(1, "d-2.log", RUN1)]).unwrap_err();
        assert!(err.contains("invocation 2 of 1"), "{err}");
    }
}
