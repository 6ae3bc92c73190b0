//! `cargo offload devices`: every device the runtime discovered, in `offload::devices()` order
//! (the index `offload!`'s `device = N` takes), with its limits; then each GPU plugin that found
//! none, and why.

use crate::OK;
use std::io::{self, Write};

pub fn run(out: &mut dyn Write) -> io::Result<i32> {
    for (index, device) in offload::devices().iter().enumerate() {
        let l = device.limits();
        writeln!(
            out,
            "{index}: {} ({:?} device {})",
            device.name(),
            device.kind(),
            device.ordinal()
        )?;
        match device.memory_info() {
            Some(Ok(m)) => writeln!(
                out,
                "   memory: {} total, {} free",
                mib(m.total),
                mib(m.free)
            )?,
            Some(Err(e)) => writeln!(out, "   memory: unknown ({e})")?,
            None => writeln!(out, "   memory: the process's own (host)")?,
        }
        writeln!(
            out,
            "   block: at most {} threads, {} x {} x {}",
            l.max_threads_per_block, l.max_block.x, l.max_block.y, l.max_block.z
        )?;
        writeln!(
            out,
            "   grid: at most {} x {} x {} blocks",
            l.max_grid.x, l.max_grid.y, l.max_grid.z
        )?;
        writeln!(
            out,
            "   shared memory: {} bytes per block",
            l.max_shared_per_block
        )?;
        writeln!(
            out,
            "   multiprocessors: {}, {} threads resident on each",
            l.multiprocessors, l.threads_per_multiprocessor
        )?;
    }
    for note in offload::plugins_without_devices() {
        writeln!(out, "no device: {note}")?;
    }
    Ok(OK)
}

fn mib(bytes: usize) -> String {
    format!("{} MiB", bytes >> 20)
}
