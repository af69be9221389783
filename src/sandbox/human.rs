//! `human:ask` → `gatehouse:executor/human`: a question to the person,
//! through the run's [`Asker`](super::services::Asker) when it has one (an
//! MCP client's elicitation), else at the controlling terminal (`/dev/tty`,
//! never the turn's stdin). Without either the answer is a denial value.

use std::io::{BufRead, BufReader, IsTerminal, Write};

use wasmtime::component::{HasData, Linker};

use super::bindings::gatehouse::executor::human;
use super::bindings::gatehouse::executor::types::{Denial, Error};
use crate::policy::DenyCode;

/// Questions and answers are cut to this many bytes.
pub const MAX_TEXT: usize = 4_096;

/// A run asks at most this many questions; later ones are denied.
pub const MAX_QUESTIONS: u32 = 64;

/// The questions of one run.
#[derive(Debug, Default)]
pub struct HumanState {
    pub asked: u32,
    /// Who answers instead of the terminal.
    pub asker: Option<super::services::AskerRef>,
}

/// What the binding works on.
pub struct HumanView<'a> {
    pub state: &'a mut HumanState,
    /// When the run ends: a question waits no longer.
    pub deadline: std::time::Instant,
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

impl human::Host for HumanView<'_> {
    fn ask(&mut self, question: String) -> Result<String, Error> {
        if self.state.asked >= MAX_QUESTIONS {
            return Err(Error::Denied(Denial {
                code: DenyCode::ApprovalRequired.as_str().into(),
                reason: format!("a run asks at most {MAX_QUESTIONS} questions"),
            }));
        }
        self.state.asked += 1;
        if let Some(asker) = &self.state.asker {
            let left = self
                .deadline
                .saturating_duration_since(std::time::Instant::now());
            return asker
                .0
                .ask(&cut(question), left)
                .map(cut)
                .map_err(|(code, reason)| {
                    Error::Denied(Denial {
                        code: code.as_str().into(),
                        reason,
                    })
                });
        }
        // Asked on the controlling terminal, never through the turn's own
        // stdin (which may be the command's input, or a protocol stream).
        let tty = std::io::stderr()
            .is_terminal()
            .then(|| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/tty")
                    .ok()
            })
            .flatten();
        let Some(mut out) = tty else {
            return Err(Error::Denied(Denial {
                code: DenyCode::ApprovalRequired.as_str().into(),
                reason: "there is no terminal to ask the question on".into(),
            }));
        };
        // The question is the guest's text: shown as data, control
        // characters escaped so it cannot drive the terminal.
        let shown: String = cut(question)
            .chars()
            .flat_map(|c| {
                if c.is_control() && c != '\n' {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect();
        let _ = write!(out, "\nthe executor asks: {shown}\n> ");
        let _ = out.flush();
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| Error::Failed(format!("cannot read the answer: {e}")))?;
        Ok(cut(line.trim_end_matches(['\n', '\r']).to_string()))
    }
}

struct HasHuman;

impl HasData for HasHuman {
    type Data<'a> = HumanView<'a>;
}

/// Links `gatehouse:executor/human`.
///
/// # Security
/// Hands the guest the person at the terminal: link it only with
/// `human:ask` granted.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> HumanView<'_>,
) -> wasmtime::Result<()> {
    human::add_to_linker::<T, HasHuman>(linker, getter)
}
