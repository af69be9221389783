//! `gatehouse:executor/log`: structured lines kept with the turn. Baseline
//! (no authority): the lines go nowhere but the turn's own report, capped.

use serde::Serialize;

use super::bindings::gatehouse::executor::log::{self, Level};
use super::state::HostState;

/// At most this many lines are kept; later ones are counted, not stored.
pub const MAX_LINES: usize = 1_000;
/// Each line is cut to this many bytes.
pub const MAX_LINE: usize = 4_096;

/// One guest log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    pub level: &'static str,
    pub message: String,
}

/// The lines of one run.
#[derive(Debug, Default)]
pub struct LogState {
    pub lines: Vec<LogLine>,
    pub dropped: u64,
}

impl log::Host for HostState {
    fn log(&mut self, level: Level, mut message: String) {
        if self.log.lines.len() >= MAX_LINES {
            self.log.dropped += 1;
            return;
        }
        if message.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let level = match level {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.log.lines.push(LogLine { level, message });
    }
}

pub fn add_to_linker(linker: &mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()> {
    log::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(linker, |s| s)
}
