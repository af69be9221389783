//! `run-tool` (code:exec on each program it may run, e.g. `cat`):
//! `{"program": "cat", "args": ["notes.txt"], "stdin": "text"}` →
//! `{"status": 0, "signal": null, "timed_out": false, "stdout": "…",
//! "stderr": "…", "truncated": false}` (stdout and stderr as lossy UTF-8).
//!
//! `"repeat": N` runs the command N times (default 1), whatever each call
//! answers, and returns the last answer: a loop of host calls, for the
//! deadline tests.
//!
//! `"calls": [{"program": "mv", "args": [..]}, ..]` runs each command in
//! turn, in one turn of the host, and returns one answer per call (an
//! error as `{"error": ..}`): a sequence whose later commands depend on
//! what the earlier ones did to the roots (security round 2, item 1).
//!
//! The host's errors (`denied` with its code, `failed`) come back
//! unchanged: the guest adds no policy of its own.

wit_bindgen::generate!({ world: "exec-executor", path: "../../wit" });

use gatehouse::executor::exec;
use guest_common::Fail;
use serde::Deserialize;
use serde_json::json;

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    program: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    stdin: String,
    #[serde(default)]
    repeat: Option<u32>,
    #[serde(default)]
    calls: Vec<Call>,
}

#[derive(Deserialize)]
struct Call {
    program: String,
    #[serde(default)]
    args: Vec<String>,
}

fn outcome(o: &exec::Outcome) -> serde_json::Value {
    json!({
        "status": o.status,
        "signal": o.signal,
        "timed_out": o.timed_out,
        "stdout": String::from_utf8_lossy(&o.stdout),
        "stderr": String::from_utf8_lossy(&o.stderr),
        "truncated": o.truncated,
    })
}

struct RunTool;

impl Guest for RunTool {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = guest_common::parse_input(&input)?;
        if !req.calls.is_empty() {
            let answers: Vec<serde_json::Value> = req
                .calls
                .iter()
                .map(|c| match exec::run(&c.program, &c.args, &[]) {
                    Ok(o) => outcome(&o),
                    Err(Error::Denied(d)) => json!({"error": {"denied": {"code": d.code, "reason": d.reason}}}),
                    Err(Error::InvalidInput(m)) => json!({"error": {"invalid_input": m}}),
                    Err(Error::Failed(m)) => json!({"error": {"failed": m}}),
                })
                .collect();
            return Ok(guest_common::to_output(&json!(answers))?);
        }
        let Some(program) = req.program else {
            return Err(Fail::Invalid("need a string field `program`".to_string()).into());
        };
        let mut last = exec::run(&program, &req.args, req.stdin.as_bytes());
        for _ in 1..req.repeat.unwrap_or(1) {
            last = exec::run(&program, &req.args, req.stdin.as_bytes());
        }
        let o = last?;
        Ok(guest_common::to_output(&outcome(&o))?)
    }
}

export!(RunTool);
