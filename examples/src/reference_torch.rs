//! Reference figures from torch (cuBLAS) on the GPU machine: a Python script run in the same
//! invocation as the benchmark, so both figures come from the same GPU state.
use std::process::Command;

/// Runs `script` with `python3 -c` and returns its standard output (trimmed).
pub fn python(script: &str) -> Result<String, String> {
    let out = Command::new("python3")
        .args(["-c", script])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Python source of `best_ms(f)`: the best of 20 CUDA-event timings of `f()` after 3 warm-up
/// calls, in milliseconds.
pub const BEST_MS: &str = "\
import torch
def best_ms(f):
    for _ in range(3): f()
    torch.cuda.synchronize()
    best = float('inf')
    for _ in range(20):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize()
        best = min(best, s.elapsed_time(e))
    return best
";
