//! `gatehouse conformance`: the sandbox suite, run on this host (see
//! [`gatehouse::conformance`]). Exit 0 only when nothing is broken,
//! incorrect or an error; 1 otherwise; 3 for usage errors and when the
//! guests cannot be found.

use gatehouse::conformance::{self, GuestSet, Options, Report};

use super::args::ConformanceArgs;
use super::{out, out_json, CmdResult, Context, Exit, Failure};

pub fn run(ctx: &Context, args: ConformanceArgs) -> CmdResult {
    let config = ctx.config()?;
    let guests = match &args.guests {
        Some(dir) => GuestSet::from_dir(dir),
        None => GuestSet::embedded(),
    }
    .map_err(|e| Failure::invalid(e.to_string()))?;
    let report = conformance::run(Options {
        config,
        only: args.only.clone(),
        guests,
    })
    .map_err(|e| match e {
        conformance::RunError::NoCase(_) => Failure::invalid(e.to_string()),
        e => Failure::error(gatehouse::util::chain(&e)),
    })?;
    if ctx.json {
        out_json(&report);
    } else {
        table(&report);
    }
    Ok(if report.passed() {
        Exit::Ok
    } else {
        Exit::Error
    })
}

fn table(report: &Report) {
    out(super::isolation::line(&report.isolation));
    for r in &report.isolation.reasons {
        out(format!("  {r}"));
    }
    out(format!("guests    {}", report.guests));
    out("");
    let width = report
        .records
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(0);
    for r in &report.records {
        out(format!(
            "{:<9} {:<width$}  {}",
            r.verdict.as_str(),
            r.name,
            r.observed
        ));
    }
    out("");
    for (label, c) in [
        ("holds", &report.holds),
        ("correct", &report.correct),
        ("p1", &report.p1),
        ("p2", &report.p2),
        ("total", &report.counts),
    ] {
        out(format!(
            "{label:<8} {} cases: {} held, {} correct, {} broken, {} incorrect, {} skipped, {} error",
            c.cases, c.held, c.correct, c.broken, c.incorrect, c.skipped, c.error
        ));
    }
    out(format!(
        "result   {} in {} ms",
        if report.passed() { "pass" } else { "FAIL" },
        report.elapsed_ms
    ));
}
