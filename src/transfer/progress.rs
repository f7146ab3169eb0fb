//! The progress shown while exporting or importing: a bar on a terminal, a plain line every
//! few seconds otherwise (both on stderr, so that an export to stdout stays clean).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A progress bar on a terminal; a plain line every few seconds otherwise.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: &'static str,
    count: u64,
    last: Instant,
}

impl Progress {
    pub(super) fn new(label: &'static str, total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(n) => indicatif::ProgressBar::new(n),
                None => indicatif::ProgressBar::new_spinner(),
            };
            bar.set_message(label);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} {msg}: {pos} records ({per_sec})",
            ) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            label,
            count: 0,
            last: Instant::now(),
        }
    }

    pub(super) fn tick(&mut self, n: u64) {
        self.count += n;
        match &self.bar {
            Some(bar) => bar.inc(n),
            None if self.last.elapsed() >= Duration::from_secs(5) => {
                eprintln!("{}: {} records", self.label, self.count);
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
