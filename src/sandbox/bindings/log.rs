//! `gatehouse:executor/log`: structured lines kept with the turn. Baseline
//! (no authority): the lines go nowhere but the turn's own report, capped.

use std::borrow::Cow;

use serde::Serialize;
use wasmtime::component::{HasData, Linker};

use super::wit::gatehouse::executor::log::{self, Level};
use super::{Finished, Open, OpenError, Prepare, PrepareError, Unit};
use crate::sandbox::HostState;

/// At most this many lines are kept; later ones are counted, not stored.
pub const MAX_LINES: usize = 1_000;
/// Each line is cut to this many bytes.
pub const MAX_LINE: usize = 4_096;

/// One guest log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The message, cut to [`MAX_LINE`] bytes.
    pub message: String,
}

/// The lines of one run.
#[derive(Debug, Default)]
pub struct LogState {
    /// The lines kept, at most [`MAX_LINES`].
    pub lines: Vec<LogLine>,
    /// Lines dropped past [`MAX_LINES`].
    pub dropped: u64,
}

/// What the binding works on: the run's lines.
pub struct LogView<'a> {
    /// The run's lines.
    pub state: &'a mut LogState,
}

impl log::Host for LogView<'_> {
    fn log(&mut self, level: Level, mut message: String) {
        if self.state.lines.len() >= MAX_LINES {
            self.state.dropped += 1;
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
        self.state.lines.push(LogLine { level, message });
    }
}

struct HasLog;

impl HasData for HasLog {
    type Data<'a> = LogView<'a>;
}

/// The log unit (baseline: every run has it, and it has no part).
pub struct Log;

impl Unit for Log {
    type Part = ();
    type State = LogState;
    type Runtime = ();

    fn open(_: &Open<'_>) -> Result<(), OpenError> {
        Ok(())
    }

    fn prepare(_: &(), _: &(), _: &mut Prepare<'_>) -> Result<LogState, PrepareError> {
        Ok(LogState::default())
    }

    fn describe(_: &(), _: &LogState, _: &mut Vec<Cow<'static, str>>) {}

    /// The lines the guest logged.
    fn finish(state: &mut LogState, out: &mut Finished) -> Result<(), PrepareError> {
        out.log = std::mem::take(&mut state.lines);
        Ok(())
    }
}

/// Links `gatehouse:executor/log`. Baseline: carries no authority (the
/// lines stay in the run's report, capped).
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    log::add_to_linker::<HostState, HasLog>(linker, |s| LogView { state: &mut s.log })
}
