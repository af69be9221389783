//! An actor's own turns: what `gatehouse serve` offers as its
//! `gatehouse_history` and `gatehouse_undo` tools when `[serve] tools`
//! says so.
//!
//! Only the turns the actor ran are listed or undone; another actor's turn
//! is answered exactly as a turn that does not exist, so the tools tell an
//! agent nothing about the others. An undo runs while no turn of this host
//! writes anywhere (it holds `/` as its write root): its journal is
//! reversed only against files no turn is changing, so undo's "never
//! destroys newer data" holds under a server's concurrency.

use std::path::PathBuf;

use crate::config::ServeTool;
use crate::sandbox::CancelHandle;
use crate::undo::{History, HistoryError, TurnSummary, UndoReport};

use super::Host;

impl Host {
    /// Which of gatehouse's own tools a server of this host offers
    /// (`[serve] tools`).
    pub fn serve_tools(&self) -> &[ServeTool] {
        &self.inner.config.serve_tools
    }

    fn history(&self) -> History {
        History::new(&self.inner.state.history_dir)
            .with_audit_log(&self.inner.state.state_dir.join("audit.jsonl"))
            .with_index(self.inner.stores.fleet.as_ref().map(|f| f.index.clone()))
    }

    /// The newest `limit` turns `actor` ran, oldest first.
    pub fn own_turns(&self, actor: &str, limit: usize) -> Result<Vec<TurnSummary>, HistoryError> {
        let mut turns: Vec<TurnSummary> = self
            .history()
            .turns()?
            .into_iter()
            .filter(|t| t.record.actor == actor)
            .collect();
        let skip = turns.len().saturating_sub(limit);
        turns.drain(..skip);
        Ok(turns)
    }

    /// Undoes `turn` (or with `dry_run`, says what undoing would do) if
    /// `actor` ran it; [`HistoryError::NoSuchTurn`] otherwise, whether the
    /// turn is another actor's or does not exist. Waits until no turn of
    /// this host is writing, and keeps new writing turns waiting until it
    /// is done; `cancel` ends the wait.
    ///
    /// # Security
    /// Changes files and memory the turn changed, as `gatehouse undo`
    /// does: offer it only where the person allowed it.
    pub fn undo_own(
        &self,
        actor: &str,
        turn: &str,
        dry_run: bool,
        cancel: &CancelHandle,
    ) -> Result<UndoReport, HistoryError> {
        let history = self.history();
        let owned = history
            .turns()?
            .iter()
            .any(|t| t.record.turn == turn && t.record.actor == actor);
        if !owned {
            return Err(HistoryError::NoSuchTurn(turn.to_string()));
        }
        let _held = self
            .inner
            .write_roots
            .enter(vec![PathBuf::from("/")], cancel)
            .ok_or_else(|| HistoryError::Cancelled(turn.to_string()))?;
        history.undo(turn, dry_run, &*self.inner.stores.memory)
    }
}
