//! How the stream benchmarks (`reduce_bench`, `scan_bench`) time device work and the Python
//! references they compare with: batches of launches queued on one stream, timed with the
//! stream's events; CuPy's and PyTorch's calls timed with CUDA events in the same run.

use crate::reference_torch::python;
use offload::Device;
use std::time::Duration;

/// The best time per launch of `enqueue` over `batches` batches of `per_batch` launches on one
/// stream, timed with the stream's events (after one launch to warm up).
pub fn best_per_launch(
    device: &Device,
    batches: usize,
    per_batch: u32,
    mut enqueue: impl FnMut(&offload::Stream<'_>) -> offload::Result<()>,
) -> offload::Result<Duration> {
    let mut best = Duration::MAX;
    offload::scope(|s| {
        let stream = s.stream(device)?;
        enqueue(&stream)?;
        stream.synchronize()?;
        for _ in 0..batches {
            let start = stream.record()?;
            for _ in 0..per_batch {
                enqueue(&stream)?;
            }
            let end = stream.record()?;
            best = best.min(end.elapsed_since(&start)? / per_batch);
        }
        Ok(())
    })?;
    Ok(best)
}

/// Best times in ms of `exprs` (Python expressions over `x`, `y` of `n` elements of `dtype`, a
/// float type), through `module` (`torch` or `cupy`), each the best of 20 event timings; `None`
/// without the module (or a GPU).
pub fn python_ms(module: &str, dtype: &str, n: usize, exprs: &[&str]) -> Option<Vec<f64>> {
    let setup = match module {
        "torch" => format!(
            "import torch\nx = torch.rand({n}, device='cuda', dtype=torch.{dtype}) - 0.5\ny = torch.rand({n}, device='cuda', dtype=torch.{dtype}) - 0.5\n"
        ),
        _ => format!(
            "import cupy\nx = cupy.random.rand({n}, dtype=cupy.{dtype}) - 0.5\ny = cupy.random.rand({n}, dtype=cupy.{dtype}) - 0.5\n"
        ),
    };
    python_ms_after(module, &setup, exprs)
}

/// Best times in ms of `exprs` after the Python statements `setup` (which import `module`,
/// `torch` or `cupy`, and make the data), each the best of 20 event timings after 3 warm-up
/// calls; `None` when the script fails (no such module, no GPU).
pub fn python_ms_after(module: &str, setup: &str, exprs: &[&str]) -> Option<Vec<f64>> {
    let (sync, event, elapsed) = if module == "torch" {
        (
            "torch.cuda.synchronize()",
            "torch.cuda.Event(enable_timing=True)",
            "s.elapsed_time(e)",
        )
    } else {
        (
            "cupy.cuda.Device().synchronize()",
            "cupy.cuda.Event()",
            "cupy.cuda.get_elapsed_time(s, e)",
        )
    };
    let timing = format!(
        "def best_ms(f):\n    for _ in range(3): f()\n    {sync}\n    best = float('inf')\n    for _ in range(20):\n        s = {event}; e = {event}\n        s.record(); f(); e.record(); e.synchronize()\n        best = min(best, {elapsed})\n    return best\n"
    );
    let calls: String = exprs
        .iter()
        .map(|e| format!("print(best_ms(lambda: {e}))\n"))
        .collect();
    let out = python(&format!("{setup}{timing}{calls}")).ok()?;
    out.lines().map(|l| l.trim().parse().ok()).collect()
}
