//! The one audit path of a host.
//!
//! - Every decision of a turn that runs (its gate's, its approvals, its
//!   delegated turns', every command call and every refusal of the
//!   filesystem layer) goes through the turn's [`TurnAudit`], which adds
//!   the turn, the actor's identity and the snapshot's two hashes, and
//!   hands the line to the turn's journal: to `<turn>/decisions.jsonl` once
//!   the turn has mutated something, else kept and written at the end as
//!   one record of `<state>/audit.jsonl`.
//! - A request that ends before guest code starts writes exactly one
//!   [`DenialRecord`] to `<state>/denials.jsonl`, and nothing else.
//! - Each of these records, the same bytes, also goes into the audit
//!   chain (`<state>/audit-chain.jsonl`, [`crate::state`]): a turn's by its
//!   journal at its finish, a denial's where it is written.

use serde::Serialize;

use crate::policy::{DenyCode, Identity, UtcTime};
use crate::sandbox::AuditSink;
use crate::undo::TurnJournal;

/// The snapshot's two hashes, as every audit line carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hashes {
    /// The snapshot's `definitionHash`: the actors and executors.
    #[serde(rename = "definitionHash")]
    pub definition: String,
    /// The snapshot's `policyHash`: the whole frozen policy.
    #[serde(rename = "policyHash")]
    pub policy: String,
}

/// Bytes one turn's audit keeps; past them lines are dropped and counted
/// (one line at the end says how many), so a guest that makes every call
/// it may cannot grow the audit without bound (security round 2, item 2).
pub const MAX_TURN_AUDIT_BYTES: usize = 8 << 20;

/// A turn's audit: who, under which policy, into which journal.
pub struct TurnAudit {
    /// Bytes kept so far, and what was dropped past the cap.
    kept: std::sync::atomic::AtomicUsize,
    dropped_lines: std::sync::atomic::AtomicU64,
    dropped_bytes: std::sync::atomic::AtomicU64,
    turn: String,
    /// `"turn":…,` encoded once.
    turn_field: String,
    /// `"actor":…,"identity":…,"snapshot":{…}}`: how every line of the
    /// turn ends, encoded once per actor and snapshot ([`tail`]).
    tail: std::sync::Arc<str>,
    journal: TurnJournal,
}

/// One decision of a gate, as its audit line holds it.
#[derive(Serialize)]
struct GateLine<'a> {
    request: &'a crate::policy::Request,
    decision: &'a crate::policy::Decision,
    approval: Option<&'static str>,
    grant: Option<i64>,
}

/// An approval answer, as its audit line holds it.
#[derive(Serialize)]
struct AnswerLine<'a> {
    approval: &'a super::Answer,
}

/// How every audit line of a turn by `actor` (with `identity`) under the
/// snapshot of `hashes` ends: `"actor":…,"identity":…,"snapshot":{…}}`.
pub(crate) fn tail(actor: &str, identity: Option<&Identity>, hashes: &Hashes) -> String {
    format!(
        "\"actor\":{},\"identity\":{},\"snapshot\":{}}}",
        encode(&actor),
        encode(&identity),
        encode(hashes)
    )
}

fn encode(value: &impl Serialize) -> String {
    // Encoding these values cannot fail (string keys, no maps of other
    // keys); an empty object stands in rather than losing the line.
    serde_json::to_string(value).unwrap_or_else(|_| "{}".into())
}

impl TurnAudit {
    /// The audit of `turn`, each line ending with `tail` (see [`tail`]),
    /// kept in `journal`.
    pub(crate) fn new(turn: &str, tail: std::sync::Arc<str>, journal: TurnJournal) -> TurnAudit {
        // `"turn":"<id>",` in one buffer.
        let mut turn_field = String::with_capacity(turn.len() + 12);
        turn_field.push_str("\"turn\":");
        turn_field.push_str(&encode(&turn));
        turn_field.push(',');
        TurnAudit {
            kept: Default::default(),
            dropped_lines: Default::default(),
            dropped_bytes: Default::default(),
            turn: turn.to_string(),
            turn_field,
            tail,
            journal,
        }
    }

    /// Keeps `body` (one encoded JSON object), completed with the turn
    /// (unless the body names its own, as a delegated turn's lines do),
    /// the actor, its identity and the snapshot's hashes.
    fn keep(&self, body: String, has_turn: bool) {
        // The body's own buffer becomes the line: its closing brace goes,
        // the turn and the tail follow.
        let mut line = body;
        if line.ends_with('}') {
            line.pop();
        }
        let turn = if has_turn {
            ""
        } else {
            self.turn_field.as_str()
        };
        line.reserve(1 + turn.len() + self.tail.len());
        self.finish_line(line, turn, &self.tail);
    }

    /// [`TurnAudit::keep`] of a body encoded before (shared), completed
    /// with this turn: one buffer, sized once.
    fn keep_encoded(&self, body: &str) {
        let open = body.strip_suffix('}').unwrap_or(body);
        let mut line =
            String::with_capacity(open.len() + 1 + self.turn_field.len() + self.tail.len());
        line.push_str(open);
        self.finish_line(line, &self.turn_field, &self.tail);
    }

    fn finish_line(&self, mut line: String, turn: &str, tail: &str) {
        if !line.ends_with('{') {
            line.push(',');
        }
        line.push_str(turn);
        line.push_str(tail);
        use std::sync::atomic::Ordering::Relaxed;
        let before = self.kept.fetch_add(line.len(), Relaxed);
        if before + line.len() > MAX_TURN_AUDIT_BYTES {
            self.kept.fetch_sub(line.len(), Relaxed);
            self.dropped_lines.fetch_add(1, Relaxed);
            self.dropped_bytes.fetch_add(line.len() as u64, Relaxed);
            return;
        }
        self.write(line);
    }

    fn write(&self, line: String) {
        if let Err(e) = self.journal.decision_line(line) {
            tracing::warn!("the audit of turn `{}` lost a line: {e}", self.turn);
        }
    }

    /// Ends the audit: when lines were dropped past
    /// [`MAX_TURN_AUDIT_BYTES`], one last line says how many and how many
    /// bytes (kept even past the cap).
    pub(crate) fn finish(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let lines = self.dropped_lines.swap(0, Relaxed);
        if lines == 0 {
            return;
        }
        let bytes = self.dropped_bytes.swap(0, Relaxed);
        let mut line = encode(&serde_json::json!({
            "request": {"kind": "audit", "operation": "dropped"},
            "decision": {
                "decision": "note",
                "reason": format!("{lines} audit lines ({bytes} bytes) of this turn were dropped past its cap of {MAX_TURN_AUDIT_BYTES} bytes"),
            },
            "dropped_lines": lines,
            "dropped_bytes": bytes,
        }));
        line.pop();
        line.push(',');
        line.push_str(&self.turn_field);
        line.push_str(&self.tail);
        self.write(line);
    }

    /// Records a gate's decisions and the approval answers, each encoded
    /// anew (what `record_turn_gate` must match).
    #[cfg(test)]
    fn record_gate(&self, steps: &[super::Step], answers: &[super::Answer]) {
        for s in steps {
            self.keep(encode_step(s), false);
        }
        for a in answers {
            self.keep(encode(&AnswerLine { approval: a }), false);
        }
    }

    /// Records the gate decisions of the nested turn `turn`: each line
    /// ends with `tail`, that of the actor the step was asked as (see
    /// [`tail`]): a callee delegated to another actor is gated as it.
    pub(crate) fn record_nested_gate(&self, turn: &str, tail: &str, steps: &[super::Step]) {
        let field = format!("\"turn\":{},", encode(&turn));
        for s in steps {
            let body = encode_step(s);
            let mut line = format!("{{{field}{}", body.strip_prefix('{').unwrap_or(&body));
            if line.ends_with('}') {
                line.pop();
            }
            self.finish_line(line, "", tail);
        }
    }

    /// Records a turn's own gate decisions and its approval answers, each
    /// step's body taken from `encoded` when the same step (request,
    /// decision, approval) was encoded before under the same snapshot: the
    /// line is byte for byte the one encoding it again would give.
    pub(crate) fn record_turn_gate(
        &self,
        encoded: &EncodedSteps,
        steps: &[super::Step],
        answers: &[super::Answer],
    ) {
        for s in steps {
            match encoded.get(s) {
                Some(body) => self.keep_encoded(&body),
                None => {
                    let body = encode_step(s);
                    encoded.put(s, &body);
                    self.keep(body, false);
                }
            }
        }
        for a in answers {
            self.keep(encode(&AnswerLine { approval: a }), false);
        }
    }
}

fn encode_step(s: &super::Step) -> String {
    encode(&GateLine {
        request: &s.request,
        decision: &s.decision,
        approval: s.approval,
        grant: s.decision.grant(),
    })
}

/// The gate steps encoded under one snapshot (see
/// [`TurnAudit::record_turn_gate`]), at most [`EncodedSteps::MAX`].
#[derive(Default)]
pub(crate) struct EncodedSteps {
    steps: std::sync::RwLock<Vec<(super::Step, std::sync::Arc<str>)>>,
}

impl EncodedSteps {
    /// Past this many distinct steps, new ones are encoded every time.
    const MAX: usize = 64;

    fn same(a: &super::Step, b: &super::Step) -> bool {
        a.approval == b.approval && a.decision == b.decision && a.request == b.request
    }

    fn get(&self, step: &super::Step) -> Option<std::sync::Arc<str>> {
        let steps = crate::util::read(&self.steps);
        steps
            .iter()
            .find(|(s, _)| Self::same(s, step))
            .map(|(_, body)| body.clone())
    }

    fn put(&self, step: &super::Step, body: &str) {
        let mut steps = crate::util::write(&self.steps);
        if steps.len() < Self::MAX && !steps.iter().any(|(s, _)| Self::same(s, step)) {
            steps.push((step.clone(), std::sync::Arc::from(body)));
        }
    }
}

impl AuditSink for TurnAudit {
    /// Keeps a line of the sandbox's (a command call, a refusal of the
    /// filesystem layer): every string in it is the guest's to choose, so
    /// each is bounded first ([`crate::policy::bounded`]).
    fn decision(&self, entry: crate::sandbox::services::RunDecision) {
        if let Some(body) = sorted::http(&entry) {
            return self.keep(body, false);
        }
        // Through a value: its keys sorted, as every audit line has them.
        let mut line = serde_json::to_value(&entry).unwrap_or_default();
        crate::policy::bound_strings(&mut line);
        self.keep(encode(&line), false);
    }
}

/// An HTTP request's line (one per request a guest makes, the hot one)
/// written directly: the bytes the value path gives (keys sorted, every
/// string bounded), without building the value.
mod sorted {
    use serde::Serialize;

    use crate::policy::bounded;
    use crate::sandbox::services::{RunDecision, RunRequest, RunVerdict};

    /// A JSON object being written, its keys given in sorted order.
    struct Object<'a> {
        out: &'a mut String,
        first: bool,
    }

    impl<'a> Object<'a> {
        fn open(out: &'a mut String) -> Object<'a> {
            out.push('{');
            Object { out, first: true }
        }

        fn key(&mut self, key: &str) -> &mut String {
            if !self.first {
                self.out.push(',');
            }
            self.first = false;
            self.out.push('"');
            self.out.push_str(key);
            self.out.push_str("\":");
            self.out
        }

        fn value(&mut self, key: &str, value: &impl Serialize) {
            let out = self.key(key);
            // Numbers, codes and `null` cannot fail to encode.
            if let Ok(v) = serde_json::to_string(value) {
                out.push_str(&v);
            }
        }

        /// A string the guest may choose: bounded, as every such string.
        fn text(&mut self, key: &str, text: &str) {
            self.value(key, &bounded(text).as_ref());
        }

        fn close(self) {
            self.out.push('}');
        }
    }

    /// The line of an HTTP request, or `None` for any other decision.
    pub(super) fn http(entry: &RunDecision) -> Option<String> {
        let http = matches!(
            entry.request,
            RunRequest::Http { .. } | RunRequest::HttpUnnamed { .. }
        );
        if entry.command.is_some() || !http {
            return None;
        }
        let mut out = String::with_capacity(320);
        let mut top = Object::open(&mut out);
        let end = entry.response.as_ref();
        if let Some(end) = end {
            top.value("bytes", &end.bytes);
        }
        verdict(Object::open(top.key("decision")), &entry.decision);
        if let Some(end) = end {
            top.value("duration_ms", &end.duration_ms);
            match &end.error {
                Some(e) => top.text("error", e),
                None => top.value("error", &()),
            }
            top.value("first_byte_ms", &end.first_byte_ms);
        }
        if let Some(p) = &entry.provider {
            top.text("provider", p);
        }
        if let Some(n) = end.and_then(|e| e.redacted) {
            top.value("redacted", &n);
        }
        http_request(Object::open(top.key("request")), &entry.request)?;
        if let Some(end) = end {
            top.value("status", &end.status);
        }
        top.close();
        Some(out)
    }

    /// An HTTP line's `decision` object.
    fn verdict(mut d: Object<'_>, verdict: &RunVerdict) {
        match verdict {
            RunVerdict::Allow { reason } => {
                d.text("decision", "allow");
                if let Some(r) = reason {
                    d.text("reason", r);
                }
            }
            RunVerdict::Deny { code, reason } => {
                if let Some(c) = code {
                    d.value("code", c);
                }
                d.text("decision", "deny");
                d.text("reason", reason);
            }
        }
        d.close();
    }

    /// An HTTP line's `request` object; `None` for a request that is not
    /// HTTP.
    fn http_request(mut r: Object<'_>, request: &RunRequest) -> Option<()> {
        match request {
            RunRequest::Http {
                method,
                scheme,
                host,
                port,
                path,
                query_sha256,
                query_bytes,
            } => {
                r.text("host", host);
                r.text("kind", "http");
                r.text("method", method);
                r.text("path", path);
                r.value("port", port);
                r.value("query_bytes", query_bytes);
                match query_sha256 {
                    Some(q) => r.text("query_sha256", q),
                    None => r.value("query_sha256", &()),
                }
                r.text("scheme", scheme);
            }
            RunRequest::HttpUnnamed { method, uri } => {
                r.text("kind", "http");
                r.text("method", method);
                r.text("uri", uri);
            }
            _ => return None,
        }
        r.close();
        Some(())
    }
}

/// One line of `<state>/denials.jsonl`: a request that ended before any
/// guest code ran. The input itself is never recorded, only its digest and
/// size.
#[derive(Debug, Clone, Serialize)]
pub struct DenialRecord {
    /// When the request was refused.
    pub time: UtcTime,
    /// The turn's id (it has no history directory).
    pub turn: String,
    /// The actor that asked.
    pub actor: String,
    /// The channel of the actor's identity, if it has one.
    pub channel: Option<String>,
    /// The sender of the actor's identity, if it has one.
    pub sender: Option<String>,
    /// The executor asked for.
    pub executor: String,
    /// The component's sha256 when it is known without running anything
    /// (the digest the manifest pins, or the one computed before a
    /// `DIGEST_MISMATCH` or `IMPORT_NOT_GRANTED`).
    pub component_sha256: Option<String>,
    /// sha256 of the input.
    pub input_sha256: String,
    /// The input's size, in bytes.
    pub input_bytes: usize,
    /// A command's `argv[1..]`; absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Which rule refused it.
    pub code: DenyCode,
    /// The refusal in words.
    pub reason: String,
    /// The pending approval the request left in the queue, or that
    /// answered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_id: Option<String>,
    /// The snapshot's two hashes.
    #[serde(flatten)]
    pub hashes: Hashes,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Decision, Request, RequestKind};
    use crate::undo::{AppendLog, TurnRecord};

    fn step(skill: &str, reason: &str) -> crate::host::Step {
        crate::host::Step {
            request: Request::new(
                "main",
                RequestKind::Skill {
                    skill: skill.into(),
                },
            ),
            decision: Decision::Allow {
                reason: reason.into(),
                grant: None,
            },
            approval: None,
        }
    }

    /// The audit record of turn `id` with `steps`, through the cache or not.
    fn record(
        dir: &std::path::Path,
        id: &str,
        steps: &[crate::host::Step],
        cache: Option<&EncodedSteps>,
        time: crate::policy::UtcTime,
    ) -> String {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = AppendLog::new(&dir.join(format!("{id}-{n}.jsonl")));
        let journal = TurnJournal::lazy(
            &dir.join("history"),
            TurnRecord {
                turn: id.into(),
                executor: "hello".into(),
                actor: "main".into(),
                level: "Supervised".into(),
                started_at: time,
                finished_at: None,
                status: crate::undo::TurnStatus::Running,
                undo: crate::undo::UndoState::None,
                args: Vec::new(),
            },
            Some(log.clone()),
        );
        let hashes = Hashes {
            definition: "d".into(),
            policy: "p".into(),
        };
        let audit = TurnAudit::new(id, tail("main", None, &hashes).into(), journal.clone());
        match cache {
            Some(c) => audit.record_turn_gate(c, steps, &[]),
            None => audit.record_gate(steps, &[]),
        }
        journal.finish(crate::undo::TurnStatus::Ok, time).unwrap();
        std::fs::read_to_string(log.path()).unwrap()
    }

    #[test]
    fn an_http_line_written_directly_is_byte_for_byte_the_value_path_s() {
        use crate::sandbox::services::{
            CommandEnd, ResponseEnd, RunDecision, RunRequest, RunVerdict,
        };
        let through_value = |e: &RunDecision| {
            let mut v = serde_json::to_value(e).unwrap();
            crate::policy::bound_strings(&mut v);
            encode(&v)
        };
        let long = format!("/{}\"\\\u{7}é", "a".repeat(crate::policy::MAX_KEPT + 10));
        let request = |path: &str, query: Option<&str>| RunRequest::Http {
            method: "POST".into(),
            scheme: "https",
            host: "api.example.com".into(),
            port: 8443,
            path: path.into(),
            query_sha256: query.map(|q| crate::policy::snapshot::sha256_hex(q.as_bytes())),
            query_bytes: query.map(str::len),
        };
        let end = |error: Option<&str>| ResponseEnd {
            status: 201,
            bytes: 1 << 40,
            first_byte_ms: 0.1 + 0.2,
            duration_ms: 12.0,
            error: error.map(str::to_string),
            redacted: error.map(|_| 3),
        };
        let cases = [
            RunDecision {
                request: request("/v1/x", Some("a=1")),
                decision: RunVerdict::Allow { reason: None },
                command: None,
                response: Some(end(None)),
                provider: Some("gh".into()),
            },
            RunDecision {
                request: request(&long, None),
                decision: RunVerdict::Allow {
                    reason: Some("why \"not\"".into()),
                },
                command: None,
                response: Some(end(Some(&long))),
                provider: None,
            },
            RunDecision {
                request: request("/v2", None),
                decision: RunVerdict::Deny {
                    code: Some(DenyCode::NetworkNotGranted),
                    reason: long.clone(),
                },
                command: None,
                response: None,
                provider: Some(long.clone()),
            },
            RunDecision {
                request: RunRequest::HttpUnnamed {
                    method: "GET".into(),
                    uri: "https://h/a b".into(),
                },
                decision: RunVerdict::Deny {
                    code: None,
                    reason: "no".into(),
                },
                command: None,
                response: None,
                provider: None,
            },
        ];
        for e in &cases {
            assert_eq!(sorted::http(e).as_deref(), Some(through_value(e).as_str()));
        }
        // Anything else goes the value's way.
        let tool = RunDecision {
            request: RunRequest::Tool {
                tool: "ls".into(),
                command: "ls".into(),
            },
            decision: RunVerdict::Allow { reason: None },
            command: Some(CommandEnd {
                spawned: true,
                status: Some(0),
                signal: None,
                timed_out: false,
            }),
            response: None,
            provider: None,
        };
        assert_eq!(sorted::http(&tool), None);
    }

    #[test]
    fn a_step_encoded_once_gives_the_same_line_and_another_step_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let steps = [step("hello", "granted"), step("hello", "granted again")];
        let cache = EncodedSteps::default();
        let t = crate::state::grants::now_utc();
        let plain = record(dir.path(), "t1", &steps, None, t);
        let first = record(dir.path(), "t1", &steps, Some(&cache), t);
        let cached = record(dir.path(), "t1", &steps, Some(&cache), t);
        assert_eq!(plain, first);
        assert_eq!(plain, cached);
        assert_eq!(cache.steps.read().unwrap().len(), 2);
        // Another turn, another decision: their own lines.
        let other = [step("hello", "granted"), step("other", "granted")];
        let other_line = record(dir.path(), "t2", &other, Some(&cache), t);
        assert_eq!(other_line, record(dir.path(), "t2", &other, None, t));
        assert!(other_line.contains("\"turn\":\"t2\""));
        assert!(other_line.contains("\"skill\":\"other\""));
        assert!(!other_line.contains("granted again"));
    }
}
