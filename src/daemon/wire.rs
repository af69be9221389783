//! What `gatehouse connect` and `gatehouse approvals --socket` say to the
//! daemon before anything else, and its one-line answer.
//!
//! A client's first line is one JSON object: `{"gatehouse": 1, "connect":
//! {...}}` to be served over MCP (the bytes after the answer are MCP's,
//! newline-delimited JSON-RPC, both ways), or `{"gatehouse": 1,
//! "approvals": {...}}` for one approval operation. The daemon answers
//! with one line, `{"ok": true, ...}` or `{"ok": false, "code": ...,
//! "message": ...}` (and then closes). A client whose first line is
//! JSON-RPC instead (any MCP client on the socket) is served as if it
//! had sent `connect` with nothing narrowed, and gets no answer line.
//!
//! Nothing the client says names who it is: the daemon knows that from
//! the socket's peer credentials alone.

use serde::{Deserialize, Serialize};

/// The protocol's version, the value of `gatehouse` in a first line.
pub const VERSION: u64 = 1;

/// The longest first line the daemon reads (a workspace path, an
/// approval id): longer is refused.
pub const MAX_HELLO: usize = 16 << 10;

/// A client's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// [`VERSION`].
    pub gatehouse: u64,
    /// To be served over MCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<Narrow>,
    /// One operation on the approval queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ApprovalOp>,
}

/// What a `connect` narrows of what its actor may: both optional, and
/// neither may widen it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Narrow {
    /// One of the actor's workspace roots, or a directory under one
    /// (absolute); default: its first root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// At most the actor's level (`ReadOnly`, `Supervised`, `Full`);
    /// default: the actor's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
}

/// One operation on the daemon's approval queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ApprovalOp {
    /// The entries not yet expired (with `all`, consumed ones too).
    List {
        /// Include consumed entries.
        #[serde(default)]
        all: bool,
    },
    /// One entry.
    Get {
        /// Its id.
        id: String,
    },
    /// Allow it: once, or as grants (`remember`) for at most
    /// `expires_in` (held to `[approvals] remember_max`).
    Allow {
        /// Its id.
        id: String,
        /// Record grants instead of allowing once.
        #[serde(default)]
        remember: bool,
        /// With `remember`: `30s`, `10m`, `2h`, `7d` or `forever`;
        /// default 24h.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_in: Option<String>,
    },
    /// Deny it.
    Deny {
        /// Its id.
        id: String,
    },
}

impl ApprovalOp {
    /// The entry the operation answers, if it answers one.
    pub fn answers(&self) -> Option<&str> {
        match self {
            ApprovalOp::Allow { id, .. } | ApprovalOp::Deny { id } => Some(id),
            ApprovalOp::List { .. } | ApprovalOp::Get { .. } => None,
        }
    }
}

/// A refusal, before it is sent as a [`Reply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its deny code, when it has one.
    pub code: Option<&'static str>,
    /// Why.
    pub message: String,
    /// Whether it is of the client's input.
    pub invalid_input: bool,
}

impl Refusal {
    /// A refusal with `code` (if any) and `message`.
    pub fn new(
        code: Option<&'static str>,
        message: impl Into<String>,
        invalid_input: bool,
    ) -> Refusal {
        Refusal {
            code,
            message: message.into(),
            invalid_input,
        }
    }
}

impl From<Refusal> for Reply {
    fn from(r: Refusal) -> Reply {
        Reply::refused(r.code, r.message, r.invalid_input)
    }
}

/// The daemon's answer to a first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the line was accepted.
    pub ok: bool,
    /// A refusal's deny code, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// A refusal's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether a refusal is of the client's input (a workspace or a
    /// level wider than the actor's, a malformed line): `connect` exits
    /// 3 on it, 2 on any other refusal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invalid_input: bool,
    /// Accepted `connect`: the actor served, the workspace and the level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Accepted `connect`: the workspace its turns run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Accepted `connect`: the level its turns run at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// Accepted approval operation: its result (an entry, or a list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

impl Reply {
    /// A refusal with `code` (if any) and `message`.
    pub fn refused(code: Option<&str>, message: impl Into<String>, invalid_input: bool) -> Reply {
        Reply {
            ok: false,
            code: code.map(str::to_string),
            message: Some(message.into()),
            invalid_input,
            actor: None,
            workspace: None,
            level: None,
            result: None,
        }
    }

    /// An accepted `connect`: the actor, workspace and level served.
    pub fn served(actor: &str, workspace: &str, level: &str) -> Reply {
        Reply {
            ok: true,
            code: None,
            message: None,
            invalid_input: false,
            actor: Some(actor.to_string()),
            workspace: Some(workspace.to_string()),
            level: Some(level.to_string()),
            result: None,
        }
    }

    /// An accepted approval operation with its result.
    pub fn done(result: serde_json::Value) -> Reply {
        Reply {
            ok: true,
            code: None,
            message: None,
            invalid_input: false,
            actor: None,
            workspace: None,
            level: None,
            result: Some(result),
        }
    }

    /// The line sent: the reply as JSON and a newline.
    pub fn line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
        v.push(b'\n');
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_unknown_fields_are_refused() {
        let h = Hello {
            gatehouse: VERSION,
            connect: Some(Narrow {
                workspace: Some("/w".into()),
                level: None,
            }),
            approvals: None,
        };
        let s = serde_json::to_string(&h).unwrap();
        assert_eq!(s, r#"{"gatehouse":1,"connect":{"workspace":"/w"}}"#);
        assert_eq!(serde_json::from_str::<Hello>(&s).unwrap(), h);
        let op: Hello = serde_json::from_str(
            r#"{"gatehouse":1,"approvals":{"op":"allow","id":"p-1","remember":true}}"#,
        )
        .unwrap();
        assert_eq!(op.approvals.unwrap().answers(), Some("p-1"));
        assert!(serde_json::from_str::<Hello>(r#"{"gatehouse":1,"uid":0}"#).is_err());
        assert!(serde_json::from_str::<Hello>(
            r#"{"gatehouse":1,"approvals":{"op":"deny","id":"x","as":"root"}}"#
        )
        .is_err());
    }
}
