//! How the stream benchmarks (`reduce_bench`, `scan_bench`) time device work and the Python
//! references they compare with: batches of launches queued on one stream, timed with the
//! stream's events; CuPy's and PyTorch's calls timed with CUDA events in the same run.

use crate::reference_torch::{python, BEST_MS, CUPY_BEST_MS};
use offload::Device;
use std::time::Duration;

/// The best time per launch of `enqueue` over `batches` batches of `per_batch` launches on one
/// stream, timed with the stream's events, after `kernel_timing::WARM_UP` of launches.
pub fn best_per_launch(
    device: &Device,
    batches: usize,
    per_batch: u32,
    mut enqueue: impl FnMut(&offload::Stream<'_>) -> offload::Result<()>,
) -> offload::Result<Duration> {
    let mut best = Duration::MAX;
    offload::scope(|s| {
        let stream = s.stream(device)?;
        crate::kernel_timing::warm_up(|| {
            enqueue(&stream)?;
            stream.synchronize()
        })?;
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
/// `torch` or `cupy`, and make the data), each the best of 20 event timings after 0.3 s of
/// warm-up (`reference_torch::BEST_MS`); `None` when the script fails (no such module, no GPU).
pub fn python_ms_after(module: &str, setup: &str, exprs: &[&str]) -> Option<Vec<f64>> {
    let timing = if module == "torch" {
        BEST_MS
    } else {
        CUPY_BEST_MS
    };
    let calls: String = exprs
        .iter()
        .map(|e| format!("print(best_ms(lambda: {e}))\n"))
        .collect();
    let out = python(&format!("{setup}{timing}{calls}")).ok()?;
    out.lines().map(|l| l.trim().parse().ok()).collect()
}
