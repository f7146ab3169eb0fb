//! Bar charts drawn on the server as inline SVG: no script, no external asset, colours from the
//! stylesheet (classes `s0`, `s1`, …) so they follow dark mode. Every chart is also shown as a
//! table by its page, for screen readers and for copying numbers.

use std::fmt::Write;

/// Drawing height, in SVG user units; the width is the caller's, so that text keeps its size
/// when the SVG scales (keeping its aspect ratio) to its container's width.
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 24.0;
const TOP: f64 = 10.0;

/// One bar: its label and its stacked values, one per series.
pub struct Bar {
    pub label: String,
    /// Shown in the bar's tooltip (a longer form of the label).
    pub title: String,
    pub values: Vec<u64>,
}

/// A stacked bar chart `width` units wide (about the pixels it will be shown at); `series`
/// names each value (legend and tooltips). Only some bars get an axis label, so that labels
/// never overlap.
pub fn stacked_bars(bars: &[Bar], series: &[&str], aria_label: &str, width: f64) -> String {
    let width = width.max(240.0);
    let max = bars
        .iter()
        .map(|b| b.values.iter().sum::<u64>())
        .max()
        .unwrap_or(0);
    let top = nice_ceiling(max);
    let plot_w = width - LEFT - 4.0;
    let plot_h = HEIGHT - BOTTOM - TOP;
    let n = bars.len().max(1);
    let slot = plot_w / n as f64;
    let bar_w = (slot * 0.8).max(0.5);
    let max_labels = ((width / 60.0) as usize).max(2);
    let label_every = n.div_ceil(max_labels).max(1);
    let mut svg = String::with_capacity(256 + bars.len() * 160);
    let _ = write!(
        svg,
        r#"<svg class="chart" viewBox="0 0 {width} {HEIGHT}" role="img" aria-label="{}">"#,
        escape(aria_label)
    );
    // Grid lines and their values: 0, the middle when it is a whole number, the top.
    let mut ticks = vec![0, top];
    if top % 2 == 0 {
        ticks.push(top / 2);
    }
    for value in ticks {
        let y = TOP + plot_h - plot_h * (value as f64) / (top as f64);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{width}" y2="{y:.1}"/><text class="axis" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            short_number(value)
        );
    }
    for (i, bar) in bars.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - bar_w) / 2.0;
        let mut y = TOP + plot_h;
        let mut tip = escape(&bar.title);
        for (s, value) in bar.values.iter().enumerate() {
            let _ = write!(
                tip,
                " · {}: {value}",
                escape(series.get(s).copied().unwrap_or(""))
            );
        }
        let _ = write!(svg, "<g><title>{tip}</title>");
        for (s, value) in bar.values.iter().enumerate() {
            if *value == 0 || top == 0 {
                continue;
            }
            let h = plot_h * (*value as f64) / (top as f64);
            y -= h;
            let _ = write!(
                svg,
                r#"<rect class="s{s}" x="{x:.2}" y="{y:.2}" width="{bar_w:.2}" height="{h:.2}"/>"#
            );
        }
        // An invisible full-height target, so the tooltip is reachable on empty bars too.
        let _ = write!(
            svg,
            r#"<rect class="hit" x="{:.2}" y="{TOP}" width="{slot:.2}" height="{plot_h:.2}"/></g>"#,
            LEFT + slot * i as f64
        );
        if i % label_every == 0 {
            let _ = write!(
                svg,
                r#"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                x + bar_w / 2.0,
                HEIGHT - 6.0,
                escape(&bar.label)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The smallest "round" number at or above `max` (1, 2, 5 × 10ⁿ), at least 1.
fn nice_ceiling(max: u64) -> u64 {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            let candidate = step.saturating_mul(m);
            if candidate >= max {
                return candidate.max(1);
            }
        }
        if step > u64::MAX / 10 {
            return u64::MAX;
        }
        step *= 10;
    }
}

/// 1200 → 1.2k, 3400000 → 3.4M.
fn short_number(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{}k", trim(n as f64 / 1e3)),
        _ => format!("{}M", trim(n as f64 / 1e6)),
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// Escapes text for SVG/HTML content and attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_are_round() {
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(500), 500);
        assert_eq!(short_number(12_345), "12.3k");
    }

    #[test]
    fn labels_are_escaped() {
        let svg = stacked_bars(
            &[Bar {
                label: "<b>".into(),
                title: "\"x\"".into(),
                values: vec![3, 1],
            }],
            &["humans", "bots"],
            "a<chart>",
            720.0,
        );
        assert!(!svg.contains("<b>"));
        assert!(svg.contains("&lt;b&gt;"));
        assert!(svg.contains("a&lt;chart&gt;"));
        assert_eq!(svg.matches("<rect class=\"s").count(), 2);
    }
}
