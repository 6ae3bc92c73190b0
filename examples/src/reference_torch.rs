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

/// Python source of `best_ms(f)`: `f()` called for 0.3 s of wall time first (as
/// `kernel_timing::WARM_UP` warms the benchmarks' own kernels: a GPU's clocks rise from idle,
/// libraries load their kernels), then the best of 20 device-event timings, in milliseconds;
/// over the module's synchronize call, event constructor and elapsed time of events `s` to `e`.
macro_rules! best_ms_python {
    ($sync:literal, $event:literal, $elapsed:literal) => {
        concat!(
            "import time\n",
            "def best_ms(f):\n",
            "    t = time.perf_counter()\n",
            "    while True:\n",
            "        f(); ",
            $sync,
            "\n",
            "        if time.perf_counter() - t >= 0.3: break\n",
            "    best = float('inf')\n",
            "    for _ in range(20):\n",
            "        s = ",
            $event,
            "; e = ",
            $event,
            "\n",
            "        s.record(); f(); e.record(); e.synchronize()\n",
            "        best = min(best, ",
            $elapsed,
            ")\n",
            "    return best\n",
        )
    };
}

/// `best_ms(f)` for torch (see `best_ms_python`), with torch imported.
pub const BEST_MS: &str = concat!(
    "import torch\n",
    best_ms_python!(
        "torch.cuda.synchronize()",
        "torch.cuda.Event(enable_timing=True)",
        "s.elapsed_time(e)"
    )
);

/// `best_ms(f)` for CuPy (see `best_ms_python`); the script imports cupy itself.
pub const CUPY_BEST_MS: &str = best_ms_python!(
    "cupy.cuda.Device().synchronize()",
    "cupy.cuda.Event()",
    "cupy.cuda.get_elapsed_time(s, e)"
);
