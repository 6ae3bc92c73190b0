//! Every benchmark's figures as ratios to references measured in the same run: the line the
//! benchmarks print ([`Ratio`]) and the table `bench_report` builds from their logs ([`Table`]).

mod ratio;
mod table;

pub use ratio::{Goal, Measure, Ratio};
pub use table::{Row, Table};
