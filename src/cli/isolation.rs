//! `gatehouse isolation`: the degraded-mode report of this host, with the
//! engine the configuration asks for (`[engine]`), built and read back: the
//! engine of a one-shot host, as `gatehouse run` builds it (a long-lived
//! host differs in its pool only: the `memory_limits` layer's details name
//! the kind, the allocator and how its slots are reused).

use gatehouse::host::{isolation_report, EngineKind, IsolationReport};

use super::{out, out_json, CmdResult, Context, Exit};

/// The one line a run prints: `isolation full` or `isolation degraded (…)`.
pub(super) fn line(report: &IsolationReport) -> String {
    format!("isolation {}", report.summary())
}

/// Builds the configured engine (nothing is run, nothing is written) and
/// prints its report: a table, or with `--json` the document. Exit 0
/// whether full or degraded: the report is the answer.
pub fn run(ctx: &Context) -> CmdResult {
    let config = ctx.config()?;
    let (report, profile) =
        isolation_report(&config, &ctx.state, EngineKind::OneShot).map_err(super::host::failure)?;
    let report = &report;
    report.log();
    if ctx.json {
        out_json(report);
        return Ok(Exit::Ok);
    }
    out(format!(
        "overall  {}  (version {}, on_degraded `{}`)",
        report.overall.as_str(),
        report.version,
        config.on_degraded.as_str()
    ));
    out(format!("engine   {}", profile.summary()));
    out("");
    let width = report
        .layers
        .iter()
        .map(|l| l.name.len())
        .max()
        .unwrap_or(0);
    out(format!("{:<width$}  {:<12}  reason", "layer", "state"));
    for l in &report.layers {
        let state = if l.counted {
            l.state.as_str().to_string()
        } else {
            format!("{}*", l.state.as_str())
        };
        out(format!("{:<width$}  {:<12}  {}", l.name, state, l.reason));
    }
    if report.layers.iter().any(|l| !l.counted) {
        out("");
        out("* not counted toward overall");
    }
    Ok(Exit::Ok)
}
