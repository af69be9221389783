//! A call's phases as MCP progress notifications (`notifications/progress`),
//! for a call that carries a progress token (`_meta.progressToken`):
//! decided, waiting for approval, running, done, in that order, each at
//! most once, with `progress` the phase's place (1 to 4) and `total` 4.
//!
//! The turn tells its phases on its own thread ([`ProgressRef`]), which
//! must not wait for the network: each phase is queued, and one task sends
//! them in order. [`Progress::finish`] queues `done` and waits until every
//! phase before it is sent, so that all of them reach the client before
//! the result (a parked turn keeps its reporter; the queue is not waited
//! on to close).

use std::sync::Arc;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{RequestContext, RoleServer};
use tokio::sync::{mpsc, oneshot};

use crate::host::{Phase, ProgressRef};

/// What the sending task is handed: a phase, or a request to say when
/// everything before it is sent.
enum Message {
    Phase(Phase),
    Flush(oneshot::Sender<()>),
}

/// The progress of one call.
pub(super) struct Progress {
    queue: mpsc::UnboundedSender<Message>,
}

impl Progress {
    /// The progress of the call of `context`, when it carries a token.
    pub(super) fn start(context: &RequestContext<RoleServer>) -> Option<Progress> {
        let token: ProgressToken = context.meta.get_progress_token()?;
        let peer = context.peer.clone();
        let (queue, mut messages) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            let mut last: Option<Phase> = None;
            let mut gone = false;
            while let Some(message) = messages.recv().await {
                let phase = match message {
                    Message::Phase(phase) => phase,
                    Message::Flush(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                // Each phase once, in order: a resumed turn is decided
                // again, which the client has already been told.
                if gone || last.is_some_and(|l| phase <= l) {
                    continue;
                }
                last = Some(phase);
                let mut params =
                    ProgressNotificationParam::new(token.clone(), f64::from(phase.ordinal()));
                params.total = Some(f64::from(Phase::COUNT));
                params.message = Some(phase.as_str().to_string());
                // A client gone away has nobody to tell.
                gone = peer.notify_progress(params).await.is_err();
            }
        });
        Some(Progress { queue })
    }

    /// What the turn tells its phases to.
    pub(super) fn reporter(&self) -> ProgressRef {
        let queue = self.queue.clone();
        ProgressRef(Arc::new(move |phase| {
            let _ = queue.send(Message::Phase(phase));
        }))
    }

    /// Queues `phase`.
    pub(super) fn reached(&self, phase: Phase) {
        let _ = self.queue.send(Message::Phase(phase));
    }

    /// Queues `last` (when given), then waits until every phase queued
    /// before it is sent.
    pub(super) async fn finish(self, last: Option<Phase>) {
        if let Some(phase) = last {
            self.reached(phase);
        }
        let (done, sent) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).is_ok() {
            let _ = sent.await;
        }
    }
}
