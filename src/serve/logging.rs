//! The guest's log lines as MCP log messages (`notifications/message`),
//! at or above the level the client asked for: `logging/setLevel` for the
//! session (2025-11-25), or `_meta["io.modelcontextprotocol/logLevel"]`
//! on the call itself (2026-07-28), which wins for that call.
//!
//! Before a client asks for a level, nothing is sent: the 2025-11-25
//! logging page leaves the default to the server ("the server MAY decide
//! which messages to send automatically"), and a guest's lines are its own
//! words, which a client that never asked for logs should not be handed.

// rmcp marks the logging types deprecated (SEP-2577 will drop logging in a
// later revision); 2025-11-25 and 2026-07-28 clients still use them.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

/// The level a session's client set; 0 until it sets one (nothing sent).
#[derive(Debug, Default)]
pub(super) struct SessionLevel(AtomicU8);

impl SessionLevel {
    pub(super) fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::Relaxed);
    }

    fn get(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }
}

/// RFC 5424's order, least severe first (1) to most (8).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 1,
        LoggingLevel::Info => 2,
        LoggingLevel::Notice => 3,
        LoggingLevel::Warning => 4,
        LoggingLevel::Error => 5,
        LoggingLevel::Critical => 6,
        LoggingLevel::Alert => 7,
        LoggingLevel::Emergency => 8,
    }
}

/// The MCP level of a guest line's level (`gatehouse:executor/log`).
fn level_of(level: &str) -> LoggingLevel {
    match level {
        "debug" => LoggingLevel::Debug,
        "warn" => LoggingLevel::Warning,
        "error" => LoggingLevel::Error,
        _ => LoggingLevel::Info,
    }
}

/// Sends `lines` (level, message) of executor `executor` to the client,
/// each at or above the level in force for this call; lines are sent in
/// the guest's order, before the call's result.
pub(super) async fn send_lines<'a>(
    session: &SessionLevel,
    context: &RequestContext<RoleServer>,
    executor: &str,
    lines: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    let floor = match context.meta.log_level() {
        Some(level) => rank(level),
        None => session.get(),
    };
    if floor == 0 {
        return;
    }
    for (level, message) in lines {
        let level = level_of(level);
        if rank(level) < floor {
            continue;
        }
        let params =
            LoggingMessageNotificationParam::new(level, Value::String(message.to_string()))
                .with_logger(executor);
        if let Err(e) = context.peer.notify_logging_message(params).await {
            // The client went away: the result will not reach it either.
            tracing::debug!("cannot send a log line: {e}");
            return;
        }
    }
}
