//! The progress shown while exporting or importing: a bar on a terminal, a plain line every
//! few seconds otherwise (both on stderr, so that an export to stdout stays clean).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A progress bar on a terminal; a plain line every few seconds otherwise.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: &'static str,
    /// What is counted: records, or bytes for a download.
    unit: &'static str,
    count: u64,
    last: Instant,
}

impl Progress {
    pub(super) fn new(label: &'static str, total: Option<u64>) -> Self {
        Self::counting(label, "records", total)
    }

    /// A progress that counts something other than records (a download's bytes).
    pub(super) fn with_unit(label: &'static str, unit: &'static str) -> Self {
        Self::counting(label, unit, None)
    }

    fn counting(label: &'static str, unit: &'static str, total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(n) => indicatif::ProgressBar::new(n),
                None => indicatif::ProgressBar::new_spinner(),
            };
            bar.set_message(label);
            let template = format!("{{spinner}} {{msg}}: {{pos}} {unit} ({{per_sec}})");
            if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            label,
            unit,
            count: 0,
            last: Instant::now(),
        }
    }

    pub(super) fn tick(&mut self, n: u64) {
        self.count += n;
        match &self.bar {
            Some(bar) => bar.inc(n),
            None if self.last.elapsed() >= Duration::from_secs(5) => {
                eprintln!("{}: {} {}", self.label, self.count, self.unit);
                self.last = Instant::now();
            }
            None => {}
        }
    }

    pub(super) fn finish(self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        eprintln!("{message}");
    }
}
