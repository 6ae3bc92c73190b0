//! The transfer trace: every map, unmap and copy between host and device, counted and, with
//! `OFFLOAD_INFO=1` (in the spirit of `LIBOMPTARGET_INFO`), printed to stderr with its bytes,
//! direction and time, plus one summary line per launch. While the trace is on, a copy to the
//! device of bytes the device already holds (the same host range with the same contents, sent
//! or fetched before with no host write since) is reported as redundant.
//!
//! The counters are always kept, process-wide ([`counters`]) and per thread ([`thread_counters`],
//! which tests use: what one thread moved does not depend on what others do meanwhile).

use crate::mapping::device::Device;
use crate::mapping::report::LaunchReport;
use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Sub;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// What moved between host and devices. Differences of two snapshots (`after - before`) count
/// what happened in between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Bytes copied from the host to devices.
    pub bytes_to_device: u64,
    /// Bytes copied from devices to the host.
    pub bytes_from_device: u64,
    /// Copies from the host to devices.
    pub copies_to_device: u64,
    /// Copies from devices to the host.
    pub copies_from_device: u64,
    /// Host data given a device copy (a data region's map, or a launch argument not present).
    pub maps: u64,
    /// Device copies of host data released (the final unmap).
    pub unmaps: u64,
    /// Maps and launch arguments that found their data present and only raised its count.
    pub present_hits: u64,
    /// Copies to the device of bytes it already held (counted only while the trace is on).
    pub redundant_copies: u64,
    /// Kernel launches.
    pub launches: u64,
}

impl Sub for Counters {
    type Output = Counters;
    fn sub(self, before: Counters) -> Counters {
        Counters {
            bytes_to_device: self.bytes_to_device - before.bytes_to_device,
            bytes_from_device: self.bytes_from_device - before.bytes_from_device,
            copies_to_device: self.copies_to_device - before.copies_to_device,
            copies_from_device: self.copies_from_device - before.copies_from_device,
            maps: self.maps - before.maps,
            unmaps: self.unmaps - before.unmaps,
            present_hits: self.present_hits - before.present_hits,
            redundant_copies: self.redundant_copies - before.redundant_copies,
            launches: self.launches - before.launches,
        }
    }
}

/// One counter, in the process-wide atomics and this thread's copy.
#[derive(Clone, Copy)]
enum Field {
    BytesTo,
    BytesFrom,
    CopiesTo,
    CopiesFrom,
    Maps,
    Unmaps,
    PresentHits,
    Redundant,
    Launches,
}

const FIELDS: usize = 9;

static GLOBAL: [AtomicU64; FIELDS] = [const { AtomicU64::new(0) }; FIELDS];

thread_local! {
    /// One cell per counter: an update touches its own word only.
    static THREAD: [Cell<u64>; FIELDS] = const { [const { Cell::new(0) }; FIELDS] };
}

fn add(field: Field, n: u64) {
    GLOBAL[field as usize].fetch_add(n, Relaxed);
    THREAD.with(|t| {
        let counter = &t[field as usize];
        counter.set(counter.get() + n);
    });
}

fn snapshot(v: [u64; FIELDS]) -> Counters {
    Counters {
        bytes_to_device: v[Field::BytesTo as usize],
        bytes_from_device: v[Field::BytesFrom as usize],
        copies_to_device: v[Field::CopiesTo as usize],
        copies_from_device: v[Field::CopiesFrom as usize],
        maps: v[Field::Maps as usize],
        unmaps: v[Field::Unmaps as usize],
        present_hits: v[Field::PresentHits as usize],
        redundant_copies: v[Field::Redundant as usize],
        launches: v[Field::Launches as usize],
    }
}

/// Everything every thread of the process moved so far.
pub fn counters() -> Counters {
    snapshot(std::array::from_fn(|i| GLOBAL[i].load(Relaxed)))
}

/// Everything the calling thread moved so far.
pub fn thread_counters() -> Counters {
    snapshot(THREAD.with(|t| std::array::from_fn(|i| t[i].get())))
}

static FORCED: AtomicBool = AtomicBool::new(false);

/// Turn the printed trace and the redundant-copy check on from code (as `OFFLOAD_INFO=1` does).
pub fn enable() {
    FORCED.store(true, Relaxed);
}

/// Whether the trace prints and checks for redundant copies.
pub fn enabled() -> bool {
    static FROM_ENV: OnceLock<bool> = OnceLock::new();
    FORCED.load(Relaxed)
        || *FROM_ENV
            .get_or_init(|| std::env::var("OFFLOAD_INFO").is_ok_and(|v| !v.is_empty() && v != "0"))
}

fn print(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    // Straight to stderr in one write, so that lines of concurrent threads do not interleave.
    let _ = std::io::stderr().write_all(format!("offload: {line}\n").as_bytes());
}

fn rate(bytes: usize, time: Duration) -> String {
    let secs = time.as_secs_f64();
    if secs > 0.0 {
        format!("{:.1} GB/s", bytes as f64 / secs / 1e9)
    } else {
        "-".to_string()
    }
}

/// Host data got a device copy (`kind`: to, from, tofrom, alloc).
pub(crate) fn map(device: &str, kind: &str, host: usize, bytes: usize) {
    add(Field::Maps, 1);
    if enabled() {
        print(format_args!(
            "map    {kind:<6} {bytes:>12} B  host {host:#x} on {device}"
        ));
    }
}

/// A map or launch argument found its data present.
pub(crate) fn present(device: &str, host: usize, bytes: usize, refs: usize) {
    add(Field::PresentHits, 1);
    if enabled() {
        print(format_args!(
            "present       {bytes:>12} B  host {host:#x} on {device} (count {refs})"
        ));
    }
}

/// The final unmap released host data's device copy.
pub(crate) fn unmap(device: &str, host: usize, bytes: usize) {
    add(Field::Unmaps, 1);
    if enabled() {
        print(format_args!(
            "unmap         {bytes:>12} B  host {host:#x} on {device}"
        ));
    }
}

/// Digest of the bytes last moved, by (device id, host address, bytes).
type Contents = HashMap<(usize, usize, usize), u64>;

/// Last contents seen on each device for each host range, while the trace is on.
fn device_contents() -> &'static Mutex<Contents> {
    static SEEN: OnceLock<Mutex<Contents>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

/// A fast 64-bit digest of `bytes` (four independent multiply-rotate lanes), to recognise bytes
/// sent again unchanged. Only computed while the trace is on.
fn digest(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut lanes = [1u64, 2, 3, 4];
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        for (lane, word) in lanes.iter_mut().zip(chunk.chunks_exact(8)) {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = (*lane ^ w).wrapping_mul(K).rotate_left(29);
        }
    }
    let mut h = bytes.len() as u64;
    for (i, b) in chunks.remainder().iter().enumerate() {
        h ^= (*b as u64) << ((i % 8) * 8);
        h = h.wrapping_mul(K);
    }
    lanes
        .iter()
        .fold(h, |acc, lane| (acc ^ lane).wrapping_mul(K).rotate_left(31))
}

/// What sent host bytes to a device: each kind of copy has its own way to avoid repeating it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopySource {
    /// A launch argument that no data region had mapped.
    LaunchArgument,
    /// A data region's first map (`Region::to`, `tofrom`).
    RegionMap,
    /// `MappedMut::update_to`.
    RegionUpdate,
    /// `DeviceVec::from_slice` or `copy_from_host`.
    DeviceVec,
    /// `Stream::upload` or `Stream::upload_into`.
    StreamUpload,
    /// A host slice passed to `enqueue` (streams copy them for each launch).
    StreamArgument,
}

impl CopySource {
    /// How to move these bytes once, for the redundant-copy warning.
    fn remedy(self) -> &'static str {
        match self {
            CopySource::LaunchArgument => {
                "map them once in a data region (offload::region) or keep them on the device in a \
                 DeviceVec"
            }
            CopySource::RegionMap => {
                "map them in one region around all the launches that use them (a region per \
                 iteration copies them each time)"
            }
            CopySource::RegionUpdate => {
                "call update_to only after the host changed them (the device copy is current)"
            }
            CopySource::DeviceVec => {
                "keep using the DeviceVec that holds them (pass &dv to the kernels) instead of \
                 uploading them again"
            }
            CopySource::StreamUpload => {
                "upload them once (into a DeviceVec, or a DeviceSlice of the scope) and pass that \
                 handle to the kernels"
            }
            CopySource::StreamArgument => {
                "a stream copies host slices for every launch: upload them once (a DeviceVec, or \
                 Stream::upload) and pass the handle to enqueue"
            }
        }
    }
}

/// The warning for `bytes` at `host` sent to `device` again, unchanged, by `source`.
fn redundant_warning(bytes: usize, host: *const u8, device: &str, source: CopySource) -> String {
    format!(
        "WARNING: {bytes} B at host {:#x} went to {device} again, unchanged since they last \
         moved: {}",
        host as usize,
        source.remedy()
    )
}

/// How long a copy took, or that it was queued on a stream (its time is not known then).
fn timing(bytes: usize, time: Option<Duration>) -> String {
    match time {
        Some(time) => format!(
            "in {:.3} ms ({})",
            time.as_secs_f64() * 1e3,
            rate(bytes, time)
        ),
        None => "queued on a stream".to_string(),
    }
}

/// `bytes` host bytes at `host` were copied to device `device_id` by `source`.
pub(crate) fn copy_to_device(
    device_id: usize,
    device: &str,
    host: *const u8,
    bytes: usize,
    time: Duration,
    source: CopySource,
) {
    sent_to_device(device_id, device, host, bytes, Some(time), source)
}

/// A copy of `bytes` host bytes at `host` to device `device_id` was queued on a stream by
/// `source`; the host bytes stay borrowed, unchanged, until the stream's scope ends.
pub(crate) fn queued_copy_to_device(
    device_id: usize,
    device: &str,
    host: *const u8,
    bytes: usize,
    source: CopySource,
) {
    sent_to_device(device_id, device, host, bytes, None, source)
}

fn sent_to_device(
    device_id: usize,
    device: &str,
    host: *const u8,
    bytes: usize,
    time: Option<Duration>,
    source: CopySource,
) {
    add(Field::BytesTo, bytes as u64);
    add(Field::CopiesTo, 1);
    if !enabled() {
        return;
    }
    print(format_args!(
        "copy   to     {bytes:>12} B  host {:#x} -> {device} {}",
        host as usize,
        timing(bytes, time)
    ));
    // SAFETY: the caller just copied these bytes; they are readable.
    let sum = digest(unsafe { std::slice::from_raw_parts(host, bytes) });
    let key = (device_id, host as usize, bytes);
    let mut seen = device_contents().lock().unwrap_or_else(|p| p.into_inner());
    if seen.insert(key, sum) == Some(sum) {
        add(Field::Redundant, 1);
        print(format_args!(
            "{}",
            redundant_warning(bytes, host, device, source)
        ));
    }
}

/// `bytes` device bytes were copied to host memory at `host` from device `device_id`.
pub(crate) fn copy_from_device(
    device_id: usize,
    device: &str,
    host: *const u8,
    bytes: usize,
    time: Duration,
) {
    if !received_from_device(device, host, bytes, Some(time)) {
        return;
    }
    // SAFETY: the caller just wrote these bytes; they are readable.
    let sum = digest(unsafe { std::slice::from_raw_parts(host, bytes) });
    device_contents()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert((device_id, host as usize, bytes), sum);
}

/// A copy of `bytes` device bytes to host memory at `host` from device `device_id` was queued on
/// a stream (the bytes arrive later: their contents are not known yet).
pub(crate) fn queued_copy_from_device(
    device_id: usize,
    device: &str,
    host: *const u8,
    bytes: usize,
) {
    if received_from_device(device, host, bytes, None) {
        device_contents()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(device_id, host as usize, bytes));
    }
}

/// Counts and prints a copy to the host; whether tracing is on.
fn received_from_device(
    device: &str,
    host: *const u8,
    bytes: usize,
    time: Option<Duration>,
) -> bool {
    add(Field::BytesFrom, bytes as u64);
    add(Field::CopiesFrom, 1);
    if !enabled() {
        return false;
    }
    print(format_args!(
        "copy   from   {bytes:>12} B  host {:#x} <- {device} {}",
        host as usize,
        timing(bytes, time)
    ));
    true
}

/// What one launch moved, for its summary line.
#[derive(Default)]
pub(crate) struct LaunchSummary {
    pub present: usize,
    pub copied: usize,
    pub resident: usize,
    /// Bytes copied to the device, for a launch queued on a stream (a plain launch's report
    /// counts them).
    pub bytes_to_device: usize,
    /// Bytes copied back, likewise.
    pub bytes_from_device: usize,
}

/// The summary line of a launch on a GPU.
pub(crate) fn launch(device: &str, report: &LaunchReport, summary: &LaunchSummary) {
    add(Field::Launches, 1);
    if enabled() {
        let device_time = match report.device_time {
            Some(t) => format!(" (on the device {:.3} ms)", t.as_secs_f64() * 1e3),
            None => String::new(),
        };
        print(format_args!(
            "launch {} on {}: slices {} present, {} copied, {} device-resident; {} B to device, \
             {} B from device; to {:.3} ms, kernel {:.3} ms{device_time}, from {:.3} ms",
            report.kernel,
            device,
            summary.present,
            summary.copied,
            summary.resident,
            report.bytes_to_device,
            report.bytes_from_device,
            report.time_to_device.as_secs_f64() * 1e3,
            report.kernel_time.as_secs_f64() * 1e3,
            report.time_from_device.as_secs_f64() * 1e3,
        ));
    }
}

/// A launch queued on a stream of `device`, counted; with the trace on, its summary line (its
/// copies have lines of their own; on the host device, the line of a host-backend launch with
/// a kernel time of zero, unobserved). The device is asked for its name and kind only then.
pub(crate) fn queued_launch(device: &Device, kernel: &str, summary: &LaunchSummary) {
    add(Field::Launches, 1);
    if !enabled() {
        return;
    }
    if device.memory_is_host() {
        print_host_launch(device.name(), kernel, Duration::ZERO);
    } else {
        print(format_args!(
            "queue  {} on {}: slices {} copied, {} device-resident; {} B to device, {} B from \
             device",
            kernel,
            device.name(),
            summary.copied,
            summary.resident,
            summary.bytes_to_device,
            summary.bytes_from_device,
        ));
    }
}

/// The summary line of a host-backend launch (kernels work on host memory in place) whose
/// kernel took `kernel_time`.
pub(crate) fn host_launch(device: &str, kernel: &str, kernel_time: Duration) {
    add(Field::Launches, 1);
    if enabled() {
        print_host_launch(device, kernel, kernel_time);
    }
}

/// The line of a host-backend launch.
fn print_host_launch(device: &str, kernel: &str, kernel_time: Duration) {
    print(format_args!(
        "launch {} on {}: in host memory, nothing moved; kernel {:.3} ms",
        kernel,
        device,
        kernel_time.as_secs_f64() * 1e3,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_tells_contents_apart() {
        let a: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let mut b = a.clone();
        assert_eq!(digest(&a), digest(&b));
        b[999] ^= 1;
        assert_ne!(digest(&a), digest(&b));
        b[999] ^= 1;
        b[3] ^= 0x80;
        assert_ne!(digest(&a), digest(&b));
        assert_ne!(digest(&a[..999]), digest(&a[..998]));
    }

    #[test]
    fn each_redundant_copy_names_its_own_remedy() {
        let warn = |source| redundant_warning(64, 0x1000 as *const u8, "GPU", source);
        assert!(warn(CopySource::LaunchArgument).contains("data region (offload::region)"));
        assert!(warn(CopySource::DeviceVec).contains("keep using the DeviceVec"));
        assert!(!warn(CopySource::DeviceVec).contains("offload::region"));
        assert!(warn(CopySource::RegionMap).contains("one region around all the launches"));
        assert!(warn(CopySource::RegionUpdate).contains("update_to only after the host changed"));
        assert!(warn(CopySource::StreamUpload).contains("upload them once"));
        assert!(!warn(CopySource::StreamUpload).contains("offload::region"));
        assert!(warn(CopySource::StreamArgument).contains("pass the handle to enqueue"));
        assert!(!warn(CopySource::StreamArgument).contains("offload::region"));
        assert!(warn(CopySource::LaunchArgument).starts_with(
            "WARNING: 64 B at host 0x1000 went to GPU again, unchanged since they last moved: "
        ));
    }
}
