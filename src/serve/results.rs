//! The MCP results of a call: a turn's outcome ([`result_of`]), a tool
//! error with its deny code, and one JSON value; each with the turn in
//! `_meta["gatehouse/turn"]`.

use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{json, Value};

use crate::host::{GuestResult, TurnEnd, TurnOutcome};

/// `text` cut at `cap` bytes (on a character boundary), with a marker
/// saying how much was kept.
fn capped(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[gatehouse: output truncated: {end} of {} bytes shown]",
        &text[..end],
        text.len()
    )
}

/// `_meta`: the turn and its pending id, if any (empty without a turn).
fn meta(outcome: Option<&TurnOutcome>) -> MetaObject {
    let mut m = MetaObject::new();
    if let Some(o) = outcome {
        m.insert("gatehouse/turn".into(), Value::String(o.turn.clone()));
        if let Some(id) = &o.pending_id {
            m.insert("gatehouse/pending_id".into(), Value::String(id.clone()));
        }
    }
    m
}

/// A result that is one JSON value: its text the value encoded, its
/// structured content the value itself (none for `null`).
pub(super) fn structured_result(structured: Value, is_error: bool) -> CallToolResult {
    let text = vec![ContentBlock::text(structured.to_string())];
    let mut result = if is_error {
        CallToolResult::error(text)
    } else {
        CallToolResult::success(text)
    };
    result.structured_content = (!structured.is_null()).then_some(structured);
    result
}

/// A tool error: its text `CODE: reason` (or the reason alone), its
/// structured content `code` and `reason` (and the pending id).
pub(super) fn error_result(
    outcome: Option<&TurnOutcome>,
    reason: &str,
    code: Option<&str>,
) -> CallToolResult {
    let text = match code {
        Some(c) => format!("{c}: {reason}"),
        None => reason.to_string(),
    };
    let mut structured = json!({"code": code, "reason": reason});
    if let Some(id) = outcome.and_then(|o| o.pending_id.as_ref()) {
        structured["pending_id"] = json!(id);
    }
    // `resultType: "complete"` as every result on 2026-07-28; rmcp strips
    // it for a peer on an older revision (the wire it always had).
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result.meta = Some(meta(outcome));
    result
}

/// The MCP result of a turn.
pub fn result_of(outcome: &TurnOutcome, cap: usize) -> CallToolResult {
    match &outcome.end {
        TurnEnd::Refused { code, reason } => {
            error_result(Some(outcome), reason, Some(code.as_str()))
        }
        TurnEnd::Stopped { code, message, .. } => {
            // A limit's message already starts with its code; the text
            // names it once.
            let code = code.map(|c| c.as_str());
            let reason = code
                .and_then(|c| message.strip_prefix(c))
                .and_then(|rest| rest.strip_prefix(": "))
                .unwrap_or(message);
            error_result(Some(outcome), reason, code)
        }
        TurnEnd::Invalid { message } | TurnEnd::Failed { message } => {
            error_result(Some(outcome), message, None)
        }
        TurnEnd::Ran { run } => {
            // Built as the typed result (the hot path of a server: no
            // round trip through a JSON value).
            let (mut result, structured) = match &run.result {
                GuestResult::Ok { output } => (
                    CallToolResult::success(vec![ContentBlock::text(capped(output, cap))]),
                    serde_json::from_str::<Value>(output).ok(),
                ),
                GuestResult::Err { error } => (
                    CallToolResult::error(vec![ContentBlock::text(capped(
                        &error.to_string(),
                        cap,
                    ))]),
                    Some(error.clone()),
                ),
            };
            result.structured_content = structured.filter(Value::is_object);
            result.meta = Some(meta(Some(outcome)));
            result
        }
    }
}
