//! Bar charts drawn on the server as inline SVG with HTML labels: no script, no external asset,
//! colours from the stylesheet (classes `s0`, `s1`, …) so they follow dark mode; they fit their
//! container at any width. Every chart is also shown as a table by its page, for screen readers
//! and for copying numbers.

use std::fmt::Write;

/// Drawing box of the bars, in SVG user units. The SVG holds only bars and grid lines and is
/// stretched to its container (`preserveAspectRatio="none"`); every label is HTML laid out by
/// the stylesheet (the pages' CSP allows no inline style): the y labels spread evenly over the
/// plot's height, the x labels in one equal cell per bar. Text keeps its size and the whole
/// chart fits any width, 360 px too.
const VIEW_W: f64 = 1000.0;
const VIEW_H: f64 = 200.0;

/// One bar: its label and its stacked values, one per series.
pub struct Bar {
    pub label: String,
    /// Shown in the bar's tooltip (a longer form of the label).
    pub title: String,
    pub values: Vec<u64>,
}

/// A stacked bar chart as a `<div class="chart">`: the y axis with round ticks (0, 50, 100,
/// 150, 200 for a highest bar of 197), the bars, and at most `width / 90` x labels (never
/// more than 6, so that they stay apart on a phone), the last bar always labelled. `series`
/// names each value (legend and tooltips).
pub fn stacked_bars(bars: &[Bar], series: &[&str], aria_label: &str, width: f64) -> String {
    let max = bars
        .iter()
        .map(|b| b.values.iter().sum::<u64>())
        .max()
        .unwrap_or(0);
    let (top, step) = nice_axis(max);
    let n = bars.len().max(1);
    let slot = VIEW_W / n as f64;
    let bar_w = (slot * 0.78).max(0.5);
    let max_labels = ((width / 90.0) as usize).clamp(2, 6);
    let label_every = n.div_ceil(max_labels).max(1);
    let mut out = String::with_capacity(512 + bars.len() * 200);
    let _ = write!(
        out,
        r#"<div class="chart" role="img" aria-label="{}"><div class="y-axis" aria-hidden="true">"#,
        escape(aria_label)
    );
    let ticks: Vec<u64> = (0..=top / step).map(|k| k * step).collect();
    for value in ticks.iter().rev() {
        let _ = write!(out, "<span>{}</span>", short_number(*value));
    }
    let _ = write!(
        out,
        r#"</div><div class="plot"><svg viewBox="0 0 {VIEW_W} {VIEW_H}" preserveAspectRatio="none" aria-hidden="true" focusable="false">"#
    );
    for value in &ticks {
        let y = VIEW_H - VIEW_H * (*value as f64) / (top as f64);
        let _ = write!(
            out,
            r#"<line class="grid" x1="0" y1="{y:.1}" x2="{VIEW_W}" y2="{y:.1}" vector-effect="non-scaling-stroke"/>"#
        );
    }
    for (i, bar) in bars.iter().enumerate() {
        let x = slot * i as f64 + (slot - bar_w) / 2.0;
        let mut y = VIEW_H;
        let mut tip = escape(&bar.title);
        for (s, value) in bar.values.iter().enumerate() {
            let _ = write!(
                tip,
                " · {}: {value}",
                escape(series.get(s).copied().unwrap_or(""))
            );
        }
        let _ = write!(out, "<g><title>{tip}</title>");
        for (s, value) in bar.values.iter().enumerate() {
            if *value == 0 {
                continue;
            }
            let h = VIEW_H * (*value as f64) / (top as f64);
            y -= h;
            let _ = write!(
                out,
                r#"<rect class="s{s}" x="{x:.2}" y="{y:.2}" width="{bar_w:.2}" height="{h:.2}"/>"#
            );
        }
        // An invisible full-height target, so the tooltip is reachable on empty bars too.
        let _ = write!(
            out,
            r#"<rect class="hit" x="{:.2}" y="0" width="{slot:.2}" height="{VIEW_H}"/></g>"#,
            slot * i as f64
        );
    }
    out.push_str(r#"</svg><div class="x-axis" aria-hidden="true">"#);
    let last = bars.len().saturating_sub(1);
    for (i, bar) in bars.iter().enumerate() {
        // Every `label_every`-th bar counted back from the last, so that the latest is labelled;
        // the first and last cells' labels lean inwards so they stay inside the chart.
        if (last - i) % label_every != 0 {
            out.push_str("<i></i>");
            continue;
        }
        let class = if i == last && n > 1 {
            " class=\"end\""
        } else if i * 8 < n {
            " class=\"start\""
        } else {
            ""
        };
        let _ = write!(out, "<i{class}><span>{}</span></i>", escape(&bar.label));
    }
    out.push_str("</div></div></div>");
    out
}

/// The axis for a highest value `max`: a top and a step of 1, 2, 2.5 or 5 × 10ⁿ with at most
/// 5 steps, the top the first multiple of the step at or above `max` (197 → 200 by 50).
fn nice_axis(max: u64) -> (u64, u64) {
    if max <= 5 {
        return (max.max(1), 1);
    }
    let mut scale = 1u64;
    loop {
        // Steps in tenths of `scale`, so that 2.5 × 10ⁿ stays whole.
        for m in [10u64, 20, 25, 50] {
            if m == 25 && scale < 10 {
                continue;
            }
            let step = scale.saturating_mul(m) / 10;
            let top = max.div_ceil(step).saturating_mul(step);
            if top / step <= 5 {
                return (top, step);
            }
        }
        if scale > u64::MAX / 100 {
            return (max, max);
        }
        scale *= 10;
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
        assert_eq!(nice_axis(0), (1, 1));
        assert_eq!(nice_axis(3), (3, 1));
        assert_eq!(nice_axis(11), (15, 5));
        assert_eq!(nice_axis(197), (200, 50));
        assert_eq!(nice_axis(220), (250, 50));
        assert_eq!(nice_axis(500), (500, 100));
        assert_eq!(nice_axis(9), (10, 2));
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
