//! Ordering of device data across queues, as cudarc orders its slices. Device data that outlives
//! one launch (a [`crate::DeviceVec`], a stream scope's [`crate::DeviceSlice`]) carries `Uses`:
//! which queue last wrote it and which queues read it since. A use queued on one queue first
//! makes that queue wait for the conflicting uses on the others (a read for the last write; a
//! write for the last write and the reads), through the plugins' events, so any safe program
//! gets the result it would get on one queue.
//!
//! Events are recorded only when a second queue needs them, at the time of its use: work that
//! stays on one queue records none. Such an event marks a later point of the other queue than the
//! use itself, so the wait may be longer than needed, never too short.
//!
//! The uses of one launch are claimed (their locks held) from before its waits until its work is
//! queued, so that two threads queueing on the same data cannot miss each other. Locks are taken
//! without waiting, or else all in address order, so two claims never wait for each other.

use crate::plugins::Backend;
use crate::Result;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};

/// Whether uses are tracked; off only through [`set_tracking`].
static TRACKING: AtomicBool = AtomicBool::new(true);

/// Turn the ordering of device data across queues off (`false`) or back on, for the whole
/// process: for measuring what it costs.
///
/// # Safety
/// While it is off, the caller orders every use of device data on two queues (streams, or a
/// stream and plain launches) itself, with events: unordered uses race.
pub unsafe fn set_tracking(on: bool) {
    TRACKING.store(on, Relaxed);
}

/// The queues that may still be using one piece of device data (see the module docs).
#[derive(Default)]
pub(crate) struct Uses {
    in_flight: Mutex<InFlight<QueueRef>>,
}

/// A queue, compared by identity: the address of its plugin object, kept beside it (a weak
/// reference to a `dyn Backend` finds its address through the vtable's alignment each time).
/// Weak: a scope drops its streams' queues only once their work is done, so a queue that is gone
/// has nothing left to wait for. While it is held, the allocation stays, so no other queue gets
/// its address.
#[derive(Clone)]
struct QueueRef {
    at: QueueAt,
    queue: Weak<dyn Backend>,
}

/// A live queue's identity: the address of its plugin object.
#[derive(Clone, Copy, PartialEq, Eq)]
struct QueueAt(usize);

impl QueueAt {
    fn of(queue: &Arc<dyn Backend>) -> Self {
        QueueAt(Arc::as_ptr(queue) as *const () as usize)
    }
}

impl PartialEq for QueueRef {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

/// Compared with a live queue's address, so that a use that changes nothing (the common case:
/// work staying on one queue) touches no reference count.
impl PartialEq<QueueAt> for QueueRef {
    fn eq(&self, queue: &QueueAt) -> bool {
        self.at == *queue
    }
}

impl QueueRef {
    fn of(queue: &Arc<dyn Backend>, at: QueueAt) -> Self {
        QueueRef {
            at,
            queue: Arc::downgrade(queue),
        }
    }
}

/// The last writer and the readers since (each of them ordered after that write), of any kind of
/// queue `Q`.
#[derive(Debug, PartialEq)]
struct InFlight<Q> {
    writer: Option<Q>,
    readers: Vec<Q>,
}

impl<Q> Default for InFlight<Q> {
    fn default() -> Self {
        InFlight {
            writer: None,
            readers: Vec::new(),
        }
    }
}

impl<Q: PartialEq + Clone> InFlight<Q> {
    /// The queues whose work so far a use on `queue` must wait for, added to `into` once each.
    fn conflicts<K>(&self, queue: &K, write: bool, into: &mut Vec<Q>)
    where
        Q: PartialEq<K>,
    {
        let mut add = |q: &Q| {
            if q != queue && !into.contains(q) {
                into.push(q.clone());
            }
        };
        // A reader has waited for the write already.
        if let Some(writer) = &self.writer {
            if !self.readers.iter().any(|r| r == queue) {
                add(writer);
            }
        }
        if write {
            self.readers.iter().for_each(add);
        }
    }

    /// Whether a use on `queue` waits for nothing (`conflicts` would add none): it is ordered
    /// after the last write (the queue made it, or read since), and for a write no other queue
    /// has read since.
    #[inline]
    fn settled<K>(&self, queue: &K, write: bool) -> bool
    where
        Q: PartialEq<K>,
    {
        let after_last_write = self.writer.as_ref().is_none_or(|w| w == queue)
            || self.readers.iter().any(|r| r == queue);
        after_last_write && (!write || self.readers.iter().all(|r| r == queue))
    }

    /// Whether noting a use on `queue` would change nothing: for a write, `queue` made the last
    /// one and nothing read since; for a read, `queue` has read since the last write.
    #[inline]
    fn noted<K>(&self, queue: &K, write: bool) -> bool
    where
        Q: PartialEq<K>,
    {
        if write {
            self.writer.as_ref().is_some_and(|w| w == queue) && self.readers.is_empty()
        } else {
            self.readers.iter().any(|r| r == queue)
        }
    }

    /// Note a use on `queue`, queued after its conflicts; `own` makes the entry to keep, only
    /// when one is added.
    #[inline]
    fn note<K>(&mut self, queue: &K, write: bool, own: impl FnOnce() -> Q)
    where
        Q: PartialEq<K>,
    {
        if write {
            if self.writer.as_ref().is_none_or(|w| w != queue) {
                self.writer = Some(own());
            }
            self.readers.clear();
        } else if !self.readers.iter().any(|r| r == queue) {
            self.readers.push(own());
        }
    }

    /// After a use that has completed (a plain launch, a copy the host waited for): its
    /// conflicts have completed too.
    fn completed(&mut self, write: bool) {
        self.writer = None;
        if write {
            self.readers.clear();
        }
    }

    /// Every queue that may use the data.
    fn all(&self) -> impl Iterator<Item = &Q> {
        self.writer.iter().chain(&self.readers)
    }
}

impl Uses {
    /// Wait on the host until every queued use is done (before the memory is freed).
    pub(crate) fn wait_all(&self) -> Result<()> {
        let in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        for queue in in_flight.all().filter_map(|q| q.queue.upgrade()) {
            queue.record_event()?.synchronize()?;
        }
        Ok(())
    }

    /// A claim on this data alone, for a use that writes it when `write`.
    pub(crate) fn claim(&self, write: bool) -> Claim<'_> {
        Claim::of([(self, write)].into_iter())
    }
}

/// Uses one launch claims without a heap allocation.
const INLINE_CLAIMS: usize = 4;

/// The uses of one launch or copy, locked (see the module docs).
pub(crate) struct Claim<'u> {
    held: SmallVec<[(MutexGuard<'u, InFlight<QueueRef>>, bool); INLINE_CLAIMS]>,
}

impl<'u> Claim<'u> {
    /// Claim `uses`, each once (written if any use writes it). Inlined: the claim is not moved
    /// out of the call.
    #[inline]
    pub(crate) fn of(uses: impl Iterator<Item = (&'u Uses, bool)> + Clone) -> Claim<'u> {
        if !TRACKING.load(Relaxed) {
            return Claim {
                held: SmallVec::new(),
            };
        }
        // Uncontended, in the order they come, without waiting: no two claims can then wait for
        // each other's locks. A lock held elsewhere (or twice here: the same data passed twice)
        // gives them all back, to be taken in address order.
        let mut held = SmallVec::new();
        for (u, write) in uses.clone() {
            match u.in_flight.try_lock() {
                Ok(guard) => held.push((guard, write)),
                Err(TryLockError::Poisoned(p)) => held.push((p.into_inner(), write)),
                Err(TryLockError::WouldBlock) => {
                    drop(held);
                    return Self::in_address_order(uses);
                }
            }
        }
        Claim { held }
    }

    /// Claim `uses` waiting for their locks, taken in address order, each once.
    fn in_address_order(uses: impl Iterator<Item = (&'u Uses, bool)>) -> Claim<'u> {
        // Kept in address order as they come, each once: one order for every thread, so no
        // two claims wait for each other's locks.
        let mut distinct: SmallVec<[(&'u Uses, bool); INLINE_CLAIMS]> = SmallVec::new();
        for (u, write) in uses {
            let address = u as *const Uses as usize;
            let at = distinct
                .iter()
                .position(|(d, _)| *d as *const Uses as usize >= address)
                .unwrap_or(distinct.len());
            match distinct.get_mut(at) {
                Some(same) if std::ptr::eq(same.0, u) => same.1 |= write,
                _ => distinct.insert(at, (u, write)),
            }
        }
        let mut held = SmallVec::new();
        for (u, write) in distinct {
            let guard = u.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            held.push((guard, write));
        }
        Claim { held }
    }

    /// Whether nothing is tracked (no such data, or tracking is off).
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Make `queue` wait for the conflicting uses on other queues: one wait per such queue.
    /// Inlined: the common case, data staying on one queue, is a check of each use, without a
    /// call or gathering the (no) queues to wait for.
    #[inline]
    pub(crate) fn order_on(&self, queue: &Arc<dyn Backend>) -> Result<()> {
        let at = QueueAt::of(queue);
        if self
            .held
            .iter()
            .all(|(in_flight, write)| in_flight.settled(&at, *write))
        {
            return Ok(());
        }
        self.wait_for_conflicts(queue, at)
    }

    /// `order_on` for uses that are not all settled on `queue` (at `at`).
    #[inline(never)]
    fn wait_for_conflicts(&self, queue: &Arc<dyn Backend>, at: QueueAt) -> Result<()> {
        let mut others = Vec::new();
        for (in_flight, write) in &self.held {
            in_flight.conflicts(&at, *write, &mut others);
        }
        for other in others.iter().filter_map(|q| q.queue.upgrade()) {
            queue.wait_for(&*other)?;
        }
        Ok(())
    }

    /// Note the uses as queued on `queue` (after `order_on`), and release the claim. Inlined:
    /// the common case, uses noted on this queue already (data staying on one queue), is a
    /// check of each use, without a call.
    #[inline]
    pub(crate) fn queued_on(mut self, queue: &Arc<dyn Backend>) {
        let at = QueueAt::of(queue);
        if !self
            .held
            .iter()
            .all(|(in_flight, write)| in_flight.noted(&at, *write))
        {
            self.note_on(queue, at);
        }
    }

    /// `queued_on`'s notes, when one changes something.
    #[inline(never)]
    fn note_on(&mut self, queue: &Arc<dyn Backend>, at: QueueAt) {
        for (in_flight, write) in &mut self.held {
            in_flight.note(&at, *write, || QueueRef::of(queue, at));
        }
    }

    /// Note the uses as completed (after `order_on` and a wait for them), and release the claim.
    pub(crate) fn completed(mut self) {
        for (in_flight, write) in &mut self.held {
            in_flight.completed(*write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Claim, InFlight, Uses};
    use std::time::Duration;

    #[test]
    fn data_passed_twice_is_claimed_once_written_if_either_use_writes() {
        let (u, other) = (Uses::default(), Uses::default());
        let claim = Claim::of([(&u, false), (&other, false), (&u, true)].into_iter());
        let held: Vec<bool> = claim.held.iter().map(|(_, write)| *write).collect();
        assert_eq!(held.len(), 2);
        let u_first = (&u as *const Uses) < (&other as *const Uses);
        assert_eq!(
            held,
            if u_first {
                [true, false]
            } else {
                [false, true]
            }
        );
    }

    #[test]
    fn a_claim_waits_for_data_claimed_elsewhere() {
        let (a, b) = (Uses::default(), Uses::default());
        let elsewhere = b.claim(true);
        std::thread::scope(|s| {
            let claiming = s.spawn(|| Claim::of([(&a, false), (&b, false)].into_iter()).held.len());
            std::thread::sleep(Duration::from_millis(50));
            assert!(!claiming.is_finished(), "b is held");
            drop(elsewhere);
            assert_eq!(claiming.join().unwrap(), 2);
        });
    }

    fn waits(f: &InFlight<char>, queue: char, write: bool) -> Vec<char> {
        let mut into = Vec::new();
        f.conflicts(&queue, write, &mut into);
        into
    }

    #[test]
    fn one_queue_never_waits() {
        let mut f = InFlight::default();
        for write in [true, false, true, true, false] {
            assert!(waits(&f, 'a', write).is_empty());
            f.note(&'a', write, || 'a');
        }
    }

    #[test]
    fn a_reader_waits_for_the_last_write_once() {
        let mut f = InFlight::default();
        f.note(&'a', true, || 'a');
        assert_eq!(waits(&f, 'b', false), ['a']);
        f.note(&'b', false, || 'b');
        assert!(
            waits(&f, 'b', false).is_empty(),
            "b is ordered after the write"
        );
        assert_eq!(
            waits(&f, 'c', false),
            ['a'],
            "reads do not order each other"
        );
        assert!(waits(&f, 'a', false).is_empty());
    }

    #[test]
    fn a_writer_waits_for_the_last_write_and_every_read() {
        let mut f = InFlight::default();
        f.note(&'a', true, || 'a');
        f.note(&'b', false, || 'b');
        f.note(&'c', false, || 'c');
        assert_eq!(waits(&f, 'd', true), ['a', 'b', 'c']);
        assert_eq!(waits(&f, 'b', true), ['c'], "b read after the write");
        f.note(&'d', true, || 'd');
        assert_eq!(f.writer, Some('d'));
        assert!(f.readers.is_empty());
        assert_eq!(waits(&f, 'a', false), ['d']);
    }

    /// Calls `check` for a use by each of three queues, read and write, in every state of a
    /// sequence of writes, reads and a completion on them.
    fn every_state(check: impl Fn(&InFlight<char>, char, bool)) {
        let mut f = InFlight::default();
        let check_all = |f: &InFlight<char>| {
            for queue in ['a', 'b', 'c'] {
                for write in [false, true] {
                    check(f, queue, write);
                }
            }
        };
        check_all(&f);
        for (queue, write) in [
            ('a', true),
            ('a', false),
            ('b', false),
            ('a', true),
            ('a', false),
            ('b', true),
            ('c', false),
        ] {
            f.note(&queue, write, || queue);
            check_all(&f);
        }
        f.completed(false);
        check_all(&f);
    }

    #[test]
    fn settled_is_exactly_no_conflicts() {
        every_state(|f, queue, write| {
            let no_conflicts = waits(f, queue, write).is_empty();
            assert_eq!(f.settled(&queue, write), no_conflicts, "{queue} {write}");
        });
    }

    #[test]
    fn noted_is_exactly_a_note_that_changes_nothing() {
        every_state(|f, queue, write| {
            let mut noted = InFlight {
                writer: f.writer,
                readers: f.readers.clone(),
            };
            noted.note(&queue, write, || queue);
            assert_eq!(f.noted(&queue, write), noted == *f, "{queue} {write}");
        });
    }

    #[test]
    fn a_completed_use_leaves_nothing_to_wait_for() {
        let mut f = InFlight::default();
        f.note(&'a', true, || 'a');
        f.note(&'b', false, || 'b');
        f.completed(false);
        assert!(waits(&f, 'c', false).is_empty());
        assert_eq!(waits(&f, 'c', true), ['b'], "reads still run");
        f.completed(true);
        assert_eq!(f, InFlight::default());
    }
}
