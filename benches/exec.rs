//! `cargo bench --bench exec`: the cost of the `code:exec` OS sandbox, side
//! by side in one run: `/bin/true` started the naive way
//! (`std::process::Command`, nothing confined) against
//! `gatehouse::exec::run` (Landlock ruleset, seccomp filters, rlimits,
//! cleared environment, capped pipes, process group, timeout), and the
//! confinement alone (`exec::run` on a host whose support says no Landlock
//! and no seccomp, so only the process handling is left).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use gatehouse::exec::{run, ExecSpec, ExecSupport};
use gatehouse::sandbox::PinnedDir;

const RUNS: usize = 300;

fn percentile(mut v: Vec<f64>, p: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) * p / 100]
}

fn time(mut f: impl FnMut() -> bool) -> Option<(f64, f64)> {
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        if !f() {
            return None;
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Some((percentile(samples.clone(), 50), percentile(samples, 99)))
}

fn main() {
    let ws = std::env::temp_dir().join(format!("gatehouse-bench-exec-{}", std::process::id()));
    if std::fs::create_dir_all(&ws).is_err() {
        eprintln!("cannot create `{}`", ws.display());
        return;
    }
    // The temporary directory may sit behind a link (`/tmp` on some
    // hosts): roots are pinned by their canonical path.
    let root = match ws.canonicalize().map(|p| PinnedDir::open(&p)) {
        Ok(Ok(dir)) => dir,
        Ok(Err(e)) => {
            eprintln!("{e}");
            return;
        }
        Err(e) => {
            eprintln!("cannot resolve `{}`: {e}", ws.display());
            return;
        }
    };
    let spec = ExecSpec {
        write_roots: vec![root.clone()],
        ..ExecSpec::new(PathBuf::from("/bin/true"), root)
    };
    let support = ExecSupport::probe();
    let bare = ExecSupport {
        landlock: Err(libc::ENOSYS),
        seccomp: Err(libc::ENOSYS),
    };
    let naive = time(|| {
        Command::new("/bin/true")
            .current_dir(&ws)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let unconfined = time(|| run(&spec, &bare).is_ok_and(|o| o.status == Some(0)));
    let confined = time(|| run(&spec, &support).is_ok_and(|o| o.status == Some(0)));
    let _ = std::fs::remove_dir_all(&ws);
    let (Some(naive), Some(unconfined), Some(confined)) = (naive, unconfined, confined) else {
        eprintln!("a run of /bin/true failed");
        return;
    };
    println!("/bin/true, {RUNS} runs each, µs per command (p50 / p99)");
    println!("{:<58} {:>9} {:>9} {:>7}", "way", "p50", "p99", "ratio");
    for (name, (p50, p99)) in [
        ("naive: std::process::Command, nothing confined", naive),
        (
            "exec::run without landlock and seccomp (process handling)",
            unconfined,
        ),
        ("exec::run, fully confined", confined),
    ] {
        println!("{name:<58} {p50:>9.0} {p99:>9.0} {:>6.2}x", p50 / naive.0);
    }
}
