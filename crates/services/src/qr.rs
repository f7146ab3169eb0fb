//! QR codes of short URLs, as SVG or PNG (the `qrcode` crate lays out the modules; `png`
//! encodes). Pure: no I/O, no HTTP.

use qrcode::render::svg;
use qrcode::{Color, EcLevel, QrCode};

/// PNG sizes accepted, in pixels.
pub const PNG_MIN: u32 = 64;
pub const PNG_MAX: u32 = 2048;
pub const PNG_DEFAULT: u32 = 256;
/// Modules of white border around the code, as the standard asks.
const QUIET_ZONE: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum QrError {
    #[error("the text does not fit in a QR code: {0}")]
    TooLong(#[from] qrcode::types::QrError),
    #[error("PNG encoding failed: {0}")]
    Png(#[from] png::EncodingError),
}

fn layout(text: &str) -> Result<QrCode, QrError> {
    // Level M survives a scuffed print and keeps short URLs in small versions.
    Ok(QrCode::with_error_correction_level(
        text.as_bytes(),
        EcLevel::M,
    )?)
}

/// An SVG document (no XML declaration, so it can also sit inline in a page).
pub fn svg(text: &str) -> Result<String, QrError> {
    let code = layout(text)?;
    let image = code
        .render::<svg::Color<'_>>()
        .quiet_zone(true)
        .min_dimensions(200, 200)
        .dark_color(svg::Color("#000000"))
        .light_color(svg::Color("#ffffff"))
        .build();
    // The renderer starts with `<?xml …?>`; inline SVG must not.
    let start = image.find("<svg").unwrap_or(0);
    Ok(image[start..].to_string())
}

/// A `size`×`size` greyscale PNG.
pub fn png(text: &str, size: u32) -> Result<Vec<u8>, QrError> {
    let code = layout(text)?;
    let width = code.width();
    let colors = code.to_colors();
    let total = width + 2 * QUIET_ZONE;
    let size_px = size as usize;
    let module_at = |px: usize| px * total / size_px;
    let mut pixels = vec![255u8; size_px * size_px];
    for y in 0..size_px {
        let my = module_at(y);
        if my < QUIET_ZONE || my >= QUIET_ZONE + width {
            continue;
        }
        for x in 0..size_px {
            let mx = module_at(x);
            if mx < QUIET_ZONE || mx >= QUIET_ZONE + width {
                continue;
            }
            let index = (my - QUIET_ZONE) * width + (mx - QUIET_ZONE);
            if colors.get(index) == Some(&Color::Dark) {
                pixels[y * size_px + x] = 0;
            }
        }
    }
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, size, size);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Best);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&pixels)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_is_inline_ready() {
        let s = svg("http://sl.test/abc123").expect("svg");
        assert!(s.starts_with("<svg"));
        assert!(s.contains("viewBox") || s.contains("width"));
    }

    #[test]
    fn png_has_the_asked_size() {
        let bytes = png("http://sl.test/abc123", 100).expect("png");
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder.read_info().expect("decode");
        assert_eq!((reader.info().width, reader.info().height), (100, 100));
    }
}
