//! Mapped copies of host memory against a raw pinned memcpy of the same size, measured in the
//! same run: a region's first map and final unmap, updates of mapped data and `DeviceVec` copies,
//! from pageable and from page-locked host memory. The `mapping` and `launch_bench` benchmarks
//! print these.

use offload::{Device, DeviceVec, PinnedVec};
use offload_bench_report::{Goal, Measure, Ratio};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Interleaved rounds of every way.
const ROUNDS: usize = 5;

/// One way of copying, best of the rounds.
pub struct CopyRate {
    pub name: &'static str,
    /// Host to device (else device to host).
    pub to_device: bool,
    /// From or to page-locked host memory (`PinnedVec`; else pageable memory).
    pub page_locked: bool,
    /// GB/s of each round in turn: a slow figure in every round points at the process, one slow
    /// round at the machine (the late dips of docs/PERFORMANCE.md).
    pub rounds: [f64; ROUNDS],
    /// The raw pinned memcpy in the same direction, GB/s.
    pub pinned: f64,
}

impl CopyRate {
    /// GB/s of the best round.
    pub fn rate(&self) -> f64 {
        self.rounds.iter().copied().fold(0.0, f64::max)
    }

    /// Its best rate over the raw pinned memcpy's.
    pub fn ratio(&self) -> f64 {
        self.rate() / self.pinned
    }
}

const WAYS: [(&str, bool, bool); 8] = [
    ("region map, first (alloc + copy in)", true, false),
    ("mapped update_to", true, false),
    ("DeviceVec::copy_from_host", true, false),
    ("region map, first, of page-locked data", true, true),
    ("region unmap, final (copy out + free)", false, false),
    ("mapped update_from", false, false),
    ("DeviceVec::copy_to_host", false, false),
    ("region unmap, final, to page-locked data", false, true),
];

/// Every way, `bytes` per copy, in [`ROUNDS`] interleaved rounds (wall clock until the copy is
/// complete); `None` without a CUDA GPU (there is no raw reference, and maps copy nothing on
/// the host).
pub fn measure(device: &Device, bytes: usize) -> Result<Option<Vec<CopyRate>>> {
    let Some((pinned_to, pinned_from)) =
        crate::reference_bandwidth::pinned_host_device(device, bytes)?
    else {
        return Ok(None);
    };
    let source: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    // Written once, so that no page is first touched during a measurement.
    let (mut mapped_host, mut unmapped_host, mut vec_host) =
        (vec![1u8; bytes], vec![1u8; bytes], vec![1u8; bytes]);
    let mut resident = DeviceVec::<u8>::zeroed(device, bytes)?;
    // The same maps of page-locked host data (PinnedVec): no staging, the copies go straight.
    let pinned_source = PinnedVec::from_slice(&source)?;
    let mut pinned_out = PinnedVec::filled(1u8, bytes)?;
    // Each round measures every way once, so that no way gets a better time for running earlier
    // or later.
    let mut times = [[Duration::ZERO; ROUNDS]; WAYS.len()];
    offload::region_on(device, |outer| {
        let mut mapped = outer.tofrom(&mut mapped_host)?;
        for round in 0..ROUNDS {
            let timings = [
                offload::region_on(device, |r| timed(|| r.to(&source).map(drop)))?,
                timed(|| mapped.update_to(|_| ()))?,
                timed(|| resident.copy_from_host(&source))?,
                offload::region_on(device, |r| timed(|| r.to(&pinned_source[..]).map(drop)))?,
                final_unmap(device, &mut unmapped_host)?,
                timed(|| mapped.update_from().map(drop))?,
                timed(|| resident.copy_to_host(&mut vec_host))?,
                final_unmap(device, &mut pinned_out)?,
            ];
            for (way, t) in times.iter_mut().zip(timings) {
                way[round] = t;
            }
        }
        Ok(())
    })?;
    if vec_host != source {
        return Err("the round trip returned other bytes".into());
    }
    let gb_per_s = |time: Duration| bytes as f64 / time.as_secs_f64() / 1e9;
    let rows = WAYS
        .iter()
        .zip(times)
        .map(|(&(name, to_device, page_locked), rounds)| CopyRate {
            name,
            to_device,
            page_locked,
            rounds: rounds.map(gb_per_s),
            pinned: if to_device { pinned_to } else { pinned_from },
        })
        .collect();
    Ok(Some(rows))
}

/// The rows of [`measure`], one a line, and each row's ratio line for `bench`.
pub fn print(bench: &str, bytes: usize, rows: &[CopyRate]) {
    println!(
        "transfers of {} MiB, best of {ROUNDS} interleaved rounds, wall clock until complete; raw \
         pinned memcpy (cuMemcpy from page-locked memory, CUDA events) in the same run:",
        bytes >> 20
    );
    for row in rows {
        let dir = if row.to_device {
            "host->device"
        } else {
            "device->host"
        };
        println!(
            "  {dir} {:<42} {:6.1} GB/s   pinned memcpy {:6.1} GB/s   ratio {:.2}",
            row.name,
            row.rate(),
            row.pinned,
            row.ratio()
        );
        let rounds: Vec<String> = row.rounds.iter().map(|r| format!("{r:.1}")).collect();
        println!("      rounds, GB/s: {}", rounds.join(" "));
        Ratio::print(
            bench,
            &format!("{dir} {}, {} MiB", row.name, bytes >> 20),
            "pinned cuMemcpy",
            Measure::Speed,
            row.ratio(),
            Goal::AtLeast(0.9),
        );
    }
}

/// How long a region's final unmap of `from` data into `host` takes: copy out and release.
fn final_unmap(device: &Device, host: &mut [u8]) -> offload::Result<Duration> {
    let mut start = Instant::now();
    offload::region_on(device, |r| {
        r.from(&mut *host)?;
        start = Instant::now();
        Ok(())
    })?;
    Ok(start.elapsed())
}

/// How long `f` took.
fn timed(f: impl FnOnce() -> offload::Result<()>) -> offload::Result<Duration> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}
