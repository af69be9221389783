//! `human:ask` → `gatehouse:executor/human`: a question to the person at
//! the terminal. Without a terminal the answer is a denial value.

use std::io::{BufRead, IsTerminal, Write};

use super::bindings::gatehouse::executor::human;
use super::bindings::gatehouse::executor::types::{Denial, Error};
use super::state::HostState;
use crate::policy::DenyCode;

/// Questions and answers are cut to this many bytes.
pub const MAX_TEXT: usize = 4_096;

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

impl human::Host for HostState {
    fn ask(&mut self, question: String) -> Result<String, Error> {
        if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return Err(Error::Denied(Denial {
                code: DenyCode::ApprovalRequired.as_str().into(),
                reason: "there is no terminal to ask the question on".into(),
            }));
        }
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
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\nthe executor asks: {shown}\n> ");
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| Error::Failed(format!("cannot read the answer: {e}")))?;
        Ok(cut(line.trim_end_matches(['\n', '\r']).to_string()))
    }
}

pub fn add_to_linker(linker: &mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()> {
    human::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(linker, |s| s)
}
