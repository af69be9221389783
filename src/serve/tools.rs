//! The tools a server offers: each executor the serving actor may run,
//! its definition derived from its manifest ([`tool_json`]), and
//! gatehouse's own `[serve] tools`.

use rmcp::model::Tool;
use serde_json::{json, Value};

use crate::config::ServeTool;
use crate::manifest::Manifest;
use crate::policy::Capability;

/// One offered tool: what it runs and its MCP definition.
pub(super) struct Offered {
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) tool: Tool,
}

/// What an offered tool runs.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// An executor; `command`: a WASI command (input on stdin, `args`).
    Executor { command: bool },
    /// `gatehouse_history` (`[serve] tools`).
    History,
    /// `gatehouse_undo` (`[serve] tools`).
    Undo,
}

/// The name of the history tool.
pub const HISTORY_TOOL: &str = "gatehouse_history";
/// The name of the undo tool.
pub const UNDO_TOOL: &str = "gatehouse_undo";

/// The MCP definition of gatehouse's own tool `tool`, for `actor`.
pub(super) fn own_tool_json(tool: ServeTool, actor: &str) -> Value {
    match tool {
        ServeTool::History => json!({
            "name": HISTORY_TOOL,
            "description": format!(
                "The turns actor `{actor}` ran, oldest first (at most `limit`, newest kept): \
                 turn id, executor, start time, status, operations journaled, undo state. \
                 Only this actor's own turns."),
            "inputSchema": {"type": "object", "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20,
                          "description": "how many of the newest turns"}}},
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}
        }),
        ServeTool::Undo => json!({
            "name": UNDO_TOOL,
            "description": format!(
                "Undoes one turn actor `{actor}` ran: reverses its journaled file and memory \
                 changes, newest first; anything changed since the turn is kept. `dry_run` \
                 says what it would do. Only this actor's own turns."),
            "inputSchema": {"type": "object", "properties": {
                "turn": {"type": "string", "description": "the turn id (from gatehouse_history or a call's _meta)"},
                "dry_run": {"type": "boolean", "default": false}},
                "required": ["turn"]},
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}
        }),
    }
}

/// Whether `m` declares `cap`.
fn declares(m: &Manifest, cap: Capability) -> bool {
    m.capabilities.iter().any(|c| c.capability == cap)
}

/// The MCP tool definition of executor `m`: its description, its input
/// schema (the manifest's `input_schema`; without one, an object with any
/// fields, or for a command `input` (its stdin) and `args` (its argv)),
/// and annotations from its capabilities: `readOnlyHint` when it declares
/// no write (`fs:write`, `memory:write`, `code:exec`, `system:admin`),
/// `destructiveHint` for `fs:write`, `memory:write` or `code:exec`,
/// `openWorldHint` for `network:sites`.
pub fn tool_json(m: &Manifest) -> Value {
    let command = !m.command.is_empty();
    let schema = match &m.input_schema {
        Some(s) => s.clone(),
        None if command => json!({
            "type": "object",
            "properties": {
                "input": {"type": "string", "description": "the command's standard input"},
                "args": {"type": "array", "items": {"type": "string"},
                         "description": "the command's arguments (argv after its name)"}
            }
        }),
        None => json!({"type": "object"}),
    };
    let writes = [
        Capability::FsWrite,
        Capability::MemoryWrite,
        Capability::CodeExec,
        Capability::SystemAdmin,
    ]
    .iter()
    .any(|c| declares(m, *c));
    let destructive = [
        Capability::FsWrite,
        Capability::MemoryWrite,
        Capability::CodeExec,
    ]
    .iter()
    .any(|c| declares(m, *c));
    json!({
        "name": m.name,
        "description": m.description.clone().unwrap_or_default(),
        "inputSchema": schema,
        "annotations": {
            "readOnlyHint": !writes,
            "destructiveHint": destructive,
            "openWorldHint": declares(m, Capability::NetworkSites),
        }
    })
}
