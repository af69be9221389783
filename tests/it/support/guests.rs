//! The guests under `guests/` (built once per test binary by `setup.sh`),
//! manifests for them, and `gatehouse --json run` with its last line read.

use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};

use super::{s, Env, Run};

pub(crate) const GUESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/guests");

/// Builds the guest workspace once per test binary (the build step the
/// README's set-up runs too).
pub(crate) fn build_guests() {
    static BUILD: Once = Once::new();
    BUILD.call_once(|| {
        let status = std::process::Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/setup.sh"))
            .arg("--all")
            .status()
            .expect("run setup.sh");
        assert!(status.success(), "building the guests failed");
    });
}

/// The manifest of guest `name` (building the guests first).
pub(crate) fn guest(name: &str) -> PathBuf {
    build_guests();
    Path::new(GUESTS).join(name).join("executor.toml")
}

/// A guest's component built for wasm32-wasip2.
pub(crate) fn component(name: &str) -> PathBuf {
    build_guests();
    Path::new(GUESTS)
        .join("target/wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")))
}

/// A manifest in the test's temp dir for `component` with `caps` (TOML
/// `[[capabilities]]` blocks).
pub(crate) fn manifest(
    env: &Env,
    name: &str,
    component: &Path,
    caps: &[(&str, Option<&str>)],
) -> PathBuf {
    let mut text = format!("name = \"{name}\"\ncomponent = \"{}\"\n", s(component));
    for (cap, target) in caps {
        text.push_str(&format!("[[capabilities]]\nname = \"{cap}\"\n"));
        if let Some(t) = target {
            text.push_str(&format!("target = \"{t}\"\n"));
        }
    }
    env.write(&format!("manifests/{name}.toml"), &text)
}

pub(crate) fn run_json(
    env: &Env,
    manifest: &Path,
    ws: &Path,
    level: &str,
    input: &str,
    extra: &[&str],
) -> (Run, serde_json::Value) {
    run_json_with_vars(env, manifest, ws, level, input, extra, &[])
}

/// [`run_json`] with `vars` set in the command's environment.
pub(crate) fn run_json_with_vars(
    env: &Env,
    manifest: &Path,
    ws: &Path,
    level: &str,
    input: &str,
    extra: &[&str],
    vars: &[(&str, &str)],
) -> (Run, serde_json::Value) {
    let mut args = vec![
        "--json",
        "run",
        s(manifest),
        "--workspace",
        s(ws),
        "--level",
        level,
        "--input",
        input,
    ];
    args.extend_from_slice(extra);
    let mut cmd = env.command();
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.args(&args).output().expect("run gatehouse");
    let run = Run {
        code: out
            .status
            .code()
            .expect("exit code (not killed by a signal)"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    };
    let v = run
        .stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(serde_json::Value::Null);
    (run, v)
}

pub(crate) fn output(v: &serde_json::Value) -> serde_json::Value {
    let text = v["run"]["result"]["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output in {v:#}"));
    serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string()))
}

/// Every file under `dir` with its bytes, sorted.
pub(crate) fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                out.push((format!("{rel}/"), vec![]));
                stack.push(p);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The compiled-component cache holding the language executors, `python`
/// and `js` (issue 30), made once per test binary by a turn of each in an
/// environment of its own, and kept in the target directory's scratch
/// space (emptied first).
fn lang_cache() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let env = Env::new();
        let ws = env.mkdir("ws");
        env.mkdir("ws/out");
        for name in ["python", "js"] {
            let (run, _) = run_json(&env, &guest(name), &ws, "Full", r#"{"code":""}"#, &[]);
            run.expect(0);
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lang-cache");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(env.state_dir().join("cache")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        dir
    })
}

/// Starts `env`'s state with the language executors compiled: a copy of
/// the shared cache, so that a test does not compile them again.
pub(crate) fn seed_lang_cache(env: &Env) {
    let dest = env.mkdir("state/cache");
    for e in std::fs::read_dir(lang_cache()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dest.join(e.file_name())).unwrap();
    }
}

/// The shipped manifest of language executor `name` (`guests/NAME`, its
/// component in `guests/target/lang`) as text, its component named by
/// absolute path, so that a copy of it works from anywhere.
pub(crate) fn lang_manifest_text(name: &str) -> String {
    let shipped = guest(name);
    let rel = format!("../target/lang/{name}.wasm");
    let text = std::fs::read_to_string(&shipped).unwrap();
    assert!(text.contains(&rel), "{name}: {text}");
    text.replace(&rel, s(&shipped.parent().unwrap().join(&rel)))
}
