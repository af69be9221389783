//! `human:ask` → `gatehouse:executor/human`: a question to the person,
//! through the run's [`Asker`](crate::sandbox::services::Asker): the controlling
//! terminal (`crate::terminal::TerminalAsker`, which the command line
//! passes) or an MCP client's elicitation. Without one the answer is a
//! denial value. The asker waits no longer than what is left of the run.

use std::borrow::Cow;

use serde::Serialize;
use wasmtime::component::{HasData, Linker};

use super::wit::gatehouse::executor::human;
use super::wit::gatehouse::executor::types::{Denial, Error};
use super::{Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::Capability;
use crate::policy::DenyCode;
use crate::sandbox::HostState;

/// Questions and answers are cut to this many bytes.
pub const MAX_TEXT: usize = 4_096;

/// A run asks at most this many questions; later ones are denied.
pub const MAX_QUESTIONS: u32 = 64;

/// The questions of one run.
#[derive(Debug, Default)]
pub struct HumanState {
    /// Questions asked so far; at most [`MAX_QUESTIONS`].
    pub asked: u32,
    /// Who answers: the terminal, a client; nobody when `None`.
    pub asker: Option<crate::sandbox::services::AskerRef>,
}

/// Whether `human:ask` was granted (nothing is linked without it).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct HumanPart {
    /// Whether the guest may ask the person.
    pub granted: bool,
}

/// What the binding works on.
pub struct HumanView<'a> {
    /// The run's questions.
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
        // The sandbox opens no terminal: whoever may be asked (the person
        // at the terminal, an MCP client) is the run's asker, chosen by
        // the caller of the turn.
        Err(Error::Denied(Denial {
            code: DenyCode::ApprovalRequired.as_str().into(),
            reason: "there is no one to ask the question: no terminal and no client".into(),
        }))
    }
}

struct HasHuman;

impl HasData for HasHuman {
    type Data<'a> = HumanView<'a>;
}

/// The human unit.
pub struct Human;

impl Unit for Human {
    type Part = HumanPart;
    type State = HumanState;
    type Runtime = ();
    const FILLED_BY: &'static [Capability] = &[Capability::HumanAsk];

    fn open(_: &Open<'_>) -> Result<(), OpenError> {
        Ok(())
    }

    fn allow(part: &mut HumanPart, _: Capability, _: Option<&str>) {
        part.granted = true;
    }

    /// The run's asker, when `human:ask` was granted.
    ///
    /// # Security
    /// Hands the guest the person behind the turn (their answers).
    fn prepare(part: &HumanPart, _: &(), cx: &mut Prepare<'_>) -> Result<HumanState, PrepareError> {
        Ok(HumanState {
            asked: 0,
            asker: cx.services.asker.clone().filter(|_| part.granted),
        })
    }

    fn describe(_: &HumanPart, _: &HumanState, _: &mut Vec<Cow<'static, str>>) {}
}

/// Links `gatehouse:executor/human`.
///
/// # Security
/// Hands the guest the person behind the turn: the table links it only
/// with `human:ask` granted.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    human::add_to_linker::<HostState, HasHuman>(linker, |s| HumanView {
        state: &mut s.human,
        deadline: s.deadline,
    })
}
