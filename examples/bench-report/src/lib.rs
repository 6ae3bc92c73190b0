//! Every benchmark's figures as ratios to references measured in the same run: the line the
//! benchmarks print ([`Ratio`]), the table `bench_report` builds from their logs ([`Table`]), and
//! the font of the plots.

mod font;
mod ratio;
mod table;

pub use font::register_sans_serif;
pub use ratio::{Goal, Measure, Ratio};
pub use table::{Row, Table};
