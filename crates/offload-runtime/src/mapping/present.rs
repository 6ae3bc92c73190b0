//! The present table: which host byte ranges have a device copy on which device, with OpenMP's
//! reference counts. Data regions add entries; launches and nested maps that find their data
//! inside an entry raise its count and use the device copy instead of moving bytes. Copy-out and
//! release happen at the final unmap, by whoever drops the count to zero.
//!
//! One table for the process, keyed by (device, host start): entries of one device never
//! overlap, and a new map that overlaps an entry without fitting inside it is an error.

use crate::mapping::trace;
use crate::plugins::{Backend, DevicePtr};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// A device copy of host bytes `host..host + bytes`.
pub(crate) struct Entry {
    pub host: usize,
    pub bytes: usize,
    pub device: DevicePtr,
    /// Where the final unmap copies the device bytes back (`from`/`tofrom`); `None` for `to`
    /// and `alloc`. Writable until the entry is released: the mapping holds its borrow.
    pub copy_out: Option<*mut u8>,
    refs: usize,
}

// SAFETY: `copy_out` is a host address whose `&mut` borrow the mapping holds; it is written only
// by the final unmap, with the table entry removed, on one thread.
unsafe impl Send for Entry {}

/// Names an entry: (device id, host start).
pub(crate) type Key = (usize, usize);

pub(crate) struct Table(BTreeMap<Key, Entry>);

/// Data found present, with its count raised.
pub(crate) struct Retained {
    pub key: Key,
    /// The device copy of the asked-for range (inside the entry's).
    pub device: DevicePtr,
    pub refs: usize,
}

pub(crate) fn table() -> MutexGuard<'static, Table> {
    static TABLE: Mutex<Table> = Mutex::new(Table(BTreeMap::new()));
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

impl Table {
    /// If `host..host + bytes` (bytes > 0) lies inside an entry of `device_id`, raise its count
    /// and return its device copy. `Ok(None)` when no entry touches the range; an error when one
    /// overlaps it only in part.
    pub fn retain(
        &mut self,
        device_id: usize,
        device_name: &str,
        host: usize,
        bytes: usize,
    ) -> Result<Option<Retained>> {
        let end = host + bytes;
        let overlap = |e: &Entry| Error::MapOverlap {
            device: device_name.to_string(),
            host,
            bytes,
            mapped_host: e.host,
            mapped_bytes: e.bytes,
        };
        // Entries do not overlap: the only one that can contain `host` starts at or before it.
        let before = self
            .0
            .range_mut((device_id, 0)..=(device_id, host))
            .next_back();
        if let Some((&key, entry)) = before {
            if entry.host + entry.bytes > host {
                if end > entry.host + entry.bytes {
                    return Err(overlap(entry));
                }
                entry.refs += 1;
                return Ok(Some(Retained {
                    key,
                    device: DevicePtr(entry.device.0 + (host - entry.host) as u64),
                    refs: entry.refs,
                }));
            }
        }
        if let Some((_, entry)) = self.0.range((device_id, host + 1)..(device_id, end)).next() {
            return Err(overlap(entry));
        }
        Ok(None)
    }

    /// Add a mapping with count 1; the range was just found absent under the same lock.
    pub fn insert(
        &mut self,
        device_id: usize,
        host: usize,
        bytes: usize,
        device: DevicePtr,
        copy_out: Option<*mut u8>,
    ) -> Key {
        let key = (device_id, host);
        let entry = Entry {
            host,
            bytes,
            device,
            copy_out,
            refs: 1,
        };
        let previous = self.0.insert(key, entry);
        debug_assert!(previous.is_none(), "inserted over a live mapping");
        key
    }

    /// Lower the count of the entry `key`; at zero the entry leaves the table and is returned
    /// for the final unmap.
    pub fn release(&mut self, key: Key) -> Option<Entry> {
        let entry = self.0.get_mut(&key).expect("released a mapping twice");
        entry.refs -= 1;
        if entry.refs == 0 {
            self.0.remove(&key)
        } else {
            None
        }
    }
}

/// The final unmap of an entry out of the table: copy its bytes back to the host when it is a
/// `from`/`tofrom` mapping and `copy_back` (the region succeeded), then release the device copy.
pub(crate) fn unmap(
    backend: &dyn Backend,
    device_id: usize,
    entry: Entry,
    copy_back: bool,
) -> Result<()> {
    let mut copied = Ok(());
    if let (true, Some(host)) = (copy_back, entry.copy_out) {
        let start = std::time::Instant::now();
        // SAFETY: the mapping held the `&mut` borrow of these host bytes until now, and the
        // device copy holds `bytes`.
        copied = unsafe { backend.copy_from_device(host, entry.device, entry.bytes) }
            .and_then(|()| backend.synchronize());
        if copied.is_ok() {
            trace::copy_from_device(
                device_id,
                backend.name(),
                host,
                entry.bytes,
                start.elapsed(),
            );
        }
    }
    // SAFETY: out of the table, so no launch or map can reach it any more; the release is
    // ordered after the queued work that used it.
    unsafe { backend.free(entry.device) };
    trace::unmap(backend.name(), entry.host, entry.bytes);
    copied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_with(host: usize, bytes: usize) -> Table {
        let mut t = Table(BTreeMap::new());
        t.insert(1, host, bytes, DevicePtr(0x1000), None);
        t
    }

    #[test]
    fn contained_ranges_are_present_at_their_offset() {
        let mut t = table_with(100, 50);
        let r = t.retain(1, "d", 110, 40).unwrap().unwrap();
        assert_eq!((r.key, r.device, r.refs), ((1, 100), DevicePtr(0x100a), 2));
        let r = t.retain(1, "d", 100, 50).unwrap().unwrap();
        assert_eq!(r.refs, 3);
        assert!(t.release((1, 100)).is_none());
        assert!(t.release((1, 100)).is_none());
        assert_eq!(t.release((1, 100)).unwrap().bytes, 50);
        assert!(t.retain(1, "d", 100, 50).unwrap().is_none());
    }

    #[test]
    fn partial_overlaps_are_errors_and_neighbours_are_absent() {
        let mut t = table_with(100, 50);
        for (host, bytes) in [(90, 20), (140, 20), (50, 200), (101, 50)] {
            match t.retain(1, "d", host, bytes) {
                Err(Error::MapOverlap {
                    mapped_host: 100,
                    mapped_bytes: 50,
                    ..
                }) => {}
                other => panic!("{host}+{bytes}: {:?}", other.map(|r| r.map(|r| r.key))),
            }
        }
        for (device, host, bytes) in [(1, 50, 50), (1, 150, 10), (2, 100, 50)] {
            assert!(t.retain(device, "d", host, bytes).unwrap().is_none());
        }
    }
}
