//! The tools a server offers: each executor the serving actor may run,
//! its definition derived from its manifest ([`executor_tool`]), and
//! gatehouse's own `[serve] tools`.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
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

/// A JSON Schema object: `value` when it is an object, else `None`.
fn schema(value: Value) -> Option<Arc<JsonObject>> {
    match value {
        Value::Object(o) => Some(Arc::new(o)),
        _ => None,
    }
}

/// The annotations of a tool that reads only when `!writes`.
fn annotations(writes: bool, destructive: bool, open_world: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(!writes)
        .destructive(destructive)
        .open_world(open_world)
}

/// The MCP definition of gatehouse's own tool `tool`, for `actor`.
pub(super) fn own_tool(tool: ServeTool, actor: &str) -> Tool {
    let (name, description, input, writes) = match tool {
        ServeTool::History => (
            HISTORY_TOOL,
            format!(
                "The turns actor `{actor}` ran, oldest first (at most `limit`, newest kept): \
                 turn id, executor, start time, status, operations journaled, undo state. \
                 Only this actor's own turns."
            ),
            json!({"type": "object", "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20,
                          "description": "how many of the newest turns"}}}),
            false,
        ),
        ServeTool::Undo => (
            UNDO_TOOL,
            format!(
                "Undoes one turn actor `{actor}` ran: reverses its journaled file and memory \
                 changes, newest first; anything changed since the turn is kept. `dry_run` \
                 says what it would do. Only this actor's own turns."
            ),
            json!({"type": "object", "properties": {
                "turn": {"type": "string", "description": "the turn id (from gatehouse_history or a call's _meta)"},
                "dry_run": {"type": "boolean", "default": false}},
                "required": ["turn"]}),
            true,
        ),
    };
    Tool::new(name, description, schema(input).unwrap_or_default())
        .with_annotations(annotations(writes, writes, false))
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
/// `openWorldHint` for `network:sites`. `None` when its input schema is
/// not an object.
pub fn executor_tool(m: &Manifest) -> Option<Tool> {
    let command = !m.command.is_empty();
    let input = match &m.input_schema {
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
    let description = m.description.clone().unwrap_or_default();
    Some(
        Tool::new(m.name.clone(), description, schema(input)?).with_annotations(annotations(
            writes,
            destructive,
            declares(m, Capability::NetworkSites),
        )),
    )
}
