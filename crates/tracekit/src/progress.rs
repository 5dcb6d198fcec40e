//! A progress line on stderr for long commands, only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Shows progress through an input of known size, on stderr, once the work has taken more
/// than [`Progress::DELAY`], and only when stderr is a terminal and `--quiet` is not given.
/// Formats call [`Progress::update`] now and then (every few thousand records); it is cheap.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    total: Option<u64>,
    start: Instant,
    next_draw: Instant,
    drawn: bool,
    calls: u32,
}

impl Progress {
    /// How long a command runs before the progress line appears.
    pub const DELAY: Duration = Duration::from_secs(1);
    const INTERVAL: Duration = Duration::from_millis(200);

    /// A progress line for `total` bytes (unknown for streams), shown only if `enabled`
    /// and stderr is a terminal.
    #[must_use]
    pub fn new(total: Option<u64>, enabled: bool) -> Progress {
        let start = Instant::now();
        Progress {
            enabled: enabled && std::io::stderr().is_terminal(),
            total,
            start,
            next_draw: start.checked_add(Self::DELAY).unwrap_or(start),
            drawn: false,
            calls: 0,
        }
    }

    /// A progress line that never shows (library use, tests).
    #[must_use]
    pub fn hidden() -> Progress {
        Progress::new(None, false)
    }

    /// Reports that `done` bytes of the input have been processed.
    pub fn update(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        self.calls = self.calls.wrapping_add(1);
        if !self.calls.is_multiple_of(64) {
            return;
        }
        let now = Instant::now();
        if now < self.next_draw {
            return;
        }
        self.next_draw = now.checked_add(Self::INTERVAL).unwrap_or(now);
        let secs = now.duration_since(self.start).as_secs_f64().max(1e-9);
        let mib = done as f64 / (1024.0 * 1024.0);
        let line = match self.total {
            Some(total) if total > 0 => {
                let pct = (done as f64 / total as f64 * 100.0).min(100.0);
                format!("\r{pct:5.1}%  {mib:10.1} MiB  {:8.1} MiB/s ", mib / secs)
            }
            _ => format!("\r{mib:10.1} MiB  {:8.1} MiB/s ", mib / secs),
        };
        let _ = std::io::stderr().write_all(line.as_bytes());
        self.drawn = true;
    }

    /// Clears the progress line, if one was drawn.
    pub fn finish(&mut self) {
        if self.drawn {
            let _ = std::io::stderr().write_all(b"\r\x1b[2K");
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
