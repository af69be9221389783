//! One call of an executor: the turn it asks for, run in a slot on the
//! server's turn threads (begun, and if it needs approval parked, then
//! resumed with the person's answers), and its result.

use std::sync::Arc;

use rmcp::model::{CallToolResponse, CallToolResult, ErrorData};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::elicitation::{supports_elicitation, ElicitAsker};
use super::results::{error_result, result_of};
use super::sessions::session_of;
use super::tools::{Kind, Offered};
use super::{is_modern, logging, mrtr, progress, tasks, turns, Server};
use crate::host::{AskerRef, Begun, Phase, RunIo, TurnOutcome, TurnRequest};

impl Server {
    /// Runs one call: an executor's turn (asking the person if it needs
    /// approval), or one of gatehouse's own tools. A 2026-07-28 client is
    /// asked with an input-required result, and its retry (`state`,
    /// `responses`) resumes the turn.
    pub(super) async fn call(
        &self,
        offered: &Offered,
        arguments: serde_json::Map<String, Value>,
        retry: Option<(&str, Option<&rmcp::model::InputResponses>)>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let command = match offered.kind {
            Kind::Executor { command } => command,
            Kind::History => return Ok(self.history(&arguments).into()),
            Kind::Undo => return Ok(self.undo(&arguments, context).await.into()),
        };
        if let Some((state, responses)) = retry {
            return self
                .retry(
                    &offered.name,
                    command,
                    &arguments,
                    state,
                    responses,
                    context,
                )
                .await;
        }
        if tasks::wanted(context) {
            return self.start_task(offered, arguments, context);
        }
        // 2026-07-28 forbids requests to the client: no elicitation, an
        // input-required result instead (when the client can answer one).
        let modern = is_modern(context);
        let call = (modern && supports_elicitation(context) && self.elicits())
            .then(|| mrtr::Call::new(&offered.name, &arguments, context));
        let mut request = self.request_for(&offered.name, command, arguments, context);
        // A cancel from the client (or its going away) stops the turn: the
        // run asks the request's token at each check; so does the end of
        // its HTTP session. A turn that may be resumed by a retry asks the
        // token of whichever request carries it.
        request.cancel = match &call {
            Some(c) => c.cancel.clone(),
            None => {
                let ct = context.ct.clone();
                crate::host::CancelHandle::also_when(move || ct.is_cancelled())
            }
        };
        let progress = progress::Progress::start(context);
        request.progress = progress.as_ref().map(progress::Progress::reporter);
        let session = session_of(context);
        let registered = session
            .as_deref()
            .map(|s| (s, self.register(s, request.cancel.clone())));
        let turned = self.turn(request, context, call, progress.as_ref()).await;
        if let Some((s, key)) = registered {
            self.unregister(s, key);
        }
        let outcome = match turned {
            Ok(Turned::Done(outcome)) => Ok(outcome),
            Ok(Turned::InputRequired(r)) => {
                // The retry, a call of its own, reports the rest.
                if let Some(p) = progress {
                    p.finish(None).await;
                }
                return Ok(r.into());
            }
            Err(message) => Err(message),
        };
        if let Some(p) = progress {
            p.finish(Some(Phase::Done)).await;
        }
        Ok(self.finish(&offered.name, outcome, context).await.into())
    }

    /// The turn a call of executor `tool` with `arguments` asks for: its
    /// input (a command's stdin and arguments), the server's limits, and
    /// who answers its guest's questions.
    pub(super) fn request_for(
        &self,
        tool: &str,
        command: bool,
        arguments: serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> TurnRequest {
        let shared = &self.inner;
        let modern = is_modern(context);
        let mut request = TurnRequest::new(tool, &shared.options.actor, String::new());
        request.limits = shared.options.limits;
        if command {
            request.input = arguments
                .get("input")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            request.io = RunIo {
                args: arguments
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|v| match v {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                ..RunIo::default()
            };
        } else {
            request.input = Value::Object(arguments).to_string();
        }
        // The guest's questions (`human:ask`) go to the client too (not to
        // a 2026-07-28 one: a question mid-run cannot be an input-required
        // result).
        request.asker = Some(AskerRef(Arc::new(ElicitAsker {
            peer: context.peer.clone(),
            runtime: tokio::runtime::Handle::current(),
            timeout: shared.options.elicitation_timeout,
            refusal: if modern {
                Some("there is no one to ask: an mcp client on 2026-07-28 cannot be asked in the middle of a run")
            } else if !supports_elicitation(context) {
                Some("there is no one to ask: the mcp client does not support elicitation")
            } else {
                None
            },
            executor: tool.to_string(),
        })));
        request
    }

    /// The result of a turn of `executor`, its guest's log lines sent
    /// first (a stopped run's too).
    pub(super) async fn finish(
        &self,
        executor: &str,
        outcome: Result<TurnOutcome, String>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        if let Ok(o) = &outcome {
            let run = match &o.end {
                crate::host::TurnEnd::Ran { run } => Some(run),
                crate::host::TurnEnd::Stopped { run, .. } => run.as_ref(),
                _ => None,
            };
            if let Some(run) = run {
                // Collected first: a closure held across the await would
                // make the future not `Send`.
                let lines: Vec<(&str, &str)> = run
                    .log
                    .iter()
                    .map(|l| (l.level, l.message.as_str()))
                    .collect();
                logging::send_lines(&self.log_level, context, executor, lines).await;
            }
        }
        match outcome {
            Ok(outcome) => result_of(&outcome, self.inner.options.text_cap),
            Err(message) => error_result(None, &message, None),
        }
    }

    async fn turn(
        &self,
        request: TurnRequest,
        context: &RequestContext<RoleServer>,
        call: Option<mrtr::Call>,
        progress: Option<&progress::Progress>,
    ) -> Result<Turned, String> {
        let parked = match self.begin(request, progress).await? {
            Begun::Done(outcome) => return Ok(Turned::Done(*outcome)),
            Begun::Parked(parked) => parked,
        };
        if let Some(p) = progress {
            p.reached(Phase::WaitingForApproval);
        }
        if let Some(call) = call {
            return self.park(parked, call).map(Turned::InputRequired);
        }
        let answers = self.ask(&parked.approval, context).await;
        self.resume(parked, answers).await.map(Turned::Done)
    }

    /// Begins `request`'s turn: ended, or parked for an approval.
    ///
    /// Run here, the worker thread handed over to blocking work for the
    /// turn (no hop to another thread). A call the policy denies takes no
    /// slot, not even for the time its gate takes (ALP): the gate is asked
    /// first, with no slot held; its one denial line is written and it
    /// ends here, whatever else is running. Only a call the policy does
    /// not deny waits for one.
    pub(super) async fn begin(
        &self,
        request: TurnRequest,
        progress: Option<&progress::Progress>,
    ) -> Result<Begun, String> {
        let host = self.inner.host.clone();
        // The decision inline (microseconds, no I/O to wait for); only a
        // denial's write is handed over as blocking work.
        let refused = if host.denies(&request) {
            tokio::task::block_in_place(|| host.refusal(&request))
        } else {
            None
        };
        if let Some(outcome) = refused {
            // Decided too: the policy denied it.
            if let Some(p) = progress {
                p.reached(Phase::Decided);
            }
            return Ok(Begun::Done(Box::new(outcome)));
        }
        self.in_slot(move || host.begin(request)).await
    }

    /// Resumes a parked turn with the person's `answers`, in a slot.
    pub(super) async fn resume(
        &self,
        parked: Box<crate::host::Parked>,
        answers: Vec<crate::host::Choice>,
    ) -> Result<TurnOutcome, String> {
        let host = self.inner.host.clone();
        self.in_slot(move || host.resume(*parked, answers)).await
    }

    /// Runs `turn` once a concurrency slot is free, holding it throughout,
    /// on one of the server's turn threads ([`turns`]); on this worker,
    /// handed over to blocking work, if those threads could not start.
    pub(super) async fn in_slot<T: Send + 'static>(
        &self,
        turn: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let _slot = self
            .inner
            .slots
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        let threads = self.inner.turns.get_or_init(|| {
            let n = self.inner.options.concurrency.max(1);
            turns::TurnThreads::new(n, tokio::runtime::Handle::current())
                .map_err(|e| tracing::warn!("turns run on the protocol's worker: {e}"))
                .ok()
        });
        match threads {
            Some(threads) => threads.run(turn).await,
            None => Ok(tokio::task::block_in_place(turn)),
        }
    }
}

/// What [`Server::turn`] got to.
enum Turned {
    /// The turn ended.
    Done(TurnOutcome),
    /// It waits for a 2026-07-28 client's retry with the person's answer.
    InputRequired(rmcp::model::InputRequiredResult),
}
