//! The font the plots draw their text with: plotters' ab_glyph backend needs a TrueType file,
//! and the GPU machine may have none, so scripts carry one and name it in an environment
//! variable.

use plotters::style::FontStyle;

const DEFAULT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Register the TrueType font named by the environment variable `var` (default DejaVu Sans) as
/// plotters' "sans-serif".
pub fn register_sans_serif(var: &str) -> Result<(), String> {
    let path = std::env::var(var).unwrap_or_else(|_| DEFAULT.to_string());
    let bytes =
        std::fs::read(&path).map_err(|e| format!("{path}: {e} (set {var} to a TrueType font)"))?;
    // plotters keeps the font for the rest of the process.
    let font: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font)
        .map_err(|_| format!("{path} is not a usable font"))
}
