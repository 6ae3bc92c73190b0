//! A benchmark's figure against the reference measured in the same run, as one line of output
//! that `bench_report` collects from every benchmark's log into the table and
//! the plot in docs/. Benchmarks print their own prose as before; this line is the contract.
//!
//! ```text
//! ratio→launch_bench→enqueue on a stream→cuLaunchKernel→time→1.1600→<=1.1
//! ```
//! Fields, separated by tabs (→ above): the tag, the benchmark, what was measured, the reference, whether the
//! ratio is of times (offload / reference, lower is better) or of speeds (offload / reference,
//! higher is better), the ratio, and the goal (`<=x`, `>=x` or `-` for none).

use std::fmt;

const TAG: &str = "ratio";

/// Which way a ratio improves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// offload's time over the reference's: below 1 is faster.
    Time,
    /// offload's speed (bandwidth, FLOP/s, throughput) over the reference's: above 1 is faster.
    Speed,
}

/// A bound the ratio should keep, from the issue that set it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    AtMost(f64),
    AtLeast(f64),
    None,
}

impl Goal {
    pub fn met_by(self, value: f64) -> Option<bool> {
        match self {
            Goal::AtMost(g) => Some(value <= g),
            Goal::AtLeast(g) => Some(value >= g),
            Goal::None => None,
        }
    }
}

impl fmt::Display for Goal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Goal::AtMost(g) => write!(f, "<={g}"),
            Goal::AtLeast(g) => write!(f, ">={g}"),
            Goal::None => f.write_str("-"),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    pub bench: String,
    pub what: String,
    pub reference: String,
    pub measure: Measure,
    pub value: f64,
    pub goal: Goal,
}

impl Ratio {
    /// Print the line for `bench_report` on stdout.
    pub fn print(
        bench: &str,
        what: &str,
        reference: &str,
        measure: Measure,
        value: f64,
        goal: Goal,
    ) {
        let ratio = Ratio {
            bench: bench.into(),
            what: what.into(),
            reference: reference.into(),
            measure,
            value,
            goal,
        };
        println!("{ratio}");
    }

    /// The ratio as offload's speed over the reference's, whichever way it was measured, so
    /// that figures of both kinds can share one axis (above 1 is faster).
    pub fn relative_speed(&self) -> f64 {
        match self.measure {
            Measure::Time => 1.0 / self.value,
            Measure::Speed => self.value,
        }
    }

    /// The ratio in `line`, if it is a ratio line; an error if it is one but malformed.
    pub fn parse(line: &str) -> Option<Result<Ratio, String>> {
        let fields: Vec<&str> = line.trim_end().split('\t').collect();
        if fields.first() != Some(&TAG) {
            return None;
        }
        Some(Self::parse_fields(&fields).map_err(|e| format!("{e} in ratio line {line:?}")))
    }

    fn parse_fields(f: &[&str]) -> Result<Ratio, String> {
        let [_, bench, what, reference, measure, value, goal] = f else {
            return Err(format!("{} fields instead of 7", f.len()));
        };
        let measure = match *measure {
            "time" => Measure::Time,
            "speed" => Measure::Speed,
            other => return Err(format!("measure {other:?} is neither time nor speed")),
        };
        let number = |s: &str| s.parse::<f64>().map_err(|e| format!("{s:?}: {e}"));
        let goal = match *goal {
            "-" => Goal::None,
            g if g.starts_with("<=") => Goal::AtMost(number(&g[2..])?),
            g if g.starts_with(">=") => Goal::AtLeast(number(&g[2..])?),
            other => return Err(format!("goal {other:?} is not <=x, >=x or -")),
        };
        let value = number(value)?;
        if !value.is_finite() || value <= 0.0 {
            return Err(format!("ratio {value} is not a positive number"));
        }
        Ok(Ratio {
            bench: bench.to_string(),
            what: what.to_string(),
            reference: reference.to_string(),
            measure,
            value,
            goal,
        })
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let measure = match self.measure {
            Measure::Time => "time",
            Measure::Speed => "speed",
        };
        write!(
            f,
            "{TAG}\t{}\t{}\t{}\t{measure}\t{:.4}\t{}",
            self.bench, self.what, self.reference, self.value, self.goal
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_ratio_parses_back() {
        let r = Ratio {
            bench: "launch_bench".into(),
            what: "enqueue on a stream".into(),
            reference: "cuLaunchKernel".into(),
            measure: Measure::Time,
            value: 1.16,
            goal: Goal::AtMost(1.1),
        };
        assert_eq!(Ratio::parse(&r.to_string()), Some(Ok(r.clone())));
        assert!((r.relative_speed() - 1.0 / 1.16).abs() < 1e-12);
        assert_eq!(r.goal.met_by(r.value), Some(false));
    }

    #[test]
    fn other_lines_are_not_ratios_and_bad_ratio_lines_are_errors() {
        assert_eq!(Ratio::parse("device: NVIDIA H200"), None);
        assert_eq!(Ratio::parse("ratio of things: 2"), None);
        let short = Ratio::parse("ratio\tb\tw\tr\ttime\t1.0");
        assert!(short.unwrap().unwrap_err().contains("6 fields"));
        let measure = Ratio::parse("ratio\tb\tw\tr\tfast\t1.0\t-");
        assert!(measure
            .unwrap()
            .unwrap_err()
            .contains("neither time nor speed"));
        let goal = Ratio::parse("ratio\tb\tw\tr\tspeed\t0.9\t~1");
        assert!(goal.unwrap().unwrap_err().contains("goal"));
        let value = Ratio::parse("ratio\tb\tw\tr\tspeed\tNaN\t-");
        assert!(value.unwrap().unwrap_err().contains("positive"));
        assert_eq!(
            Ratio::parse("ratio\tb\tw\tr\tspeed\t0.95\t>=0.9").map(|r| r.map(|r| r.goal)),
            Some(Ok(Goal::AtLeast(0.9)))
        );
    }
}
