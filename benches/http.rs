//! `cargo bench --bench http`: one GET of a 1 KiB body from a local
//! HTTP/1.1 server through the `fetch` guest (`wasi:http`), side by side in
//! one run (needs the guests: `./setup.sh`):
//!
//! - (a) bare `wasmtime-wasi-http`: its default sender, no policy, the
//!   pooling engine as gatehouse configures it, one cached `InstancePre`, a
//!   fresh store per request;
//! - (b) a gatehouse turn: `Host::run` of `fetch` granted
//!   `network:sites` on `http://127.0.0.1:PORT/**` and `provider:access`
//!   on a provider under that URL: the gate, the plan, a fresh instance,
//!   the request's decision, vetting, its provider header and its audit
//!   line, the turn's audit record.
//!
//! Both send one request per sample to the same in-process server, in
//! interleaved rounds. The last line is one JSON object with
//! `bare_http_p50_us` and `gatehouse_http_p50_us` (read by programs).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::Instant;

use gatehouse::config::{HostConfig, ProviderDef, StatePaths, ValueSource};
use gatehouse::host::{Host, HostOptions, NoOne, TurnEnd, TurnRequest};
use gatehouse::manifest::Manifest;
use gatehouse::policy::Level;
use gatehouse::sandbox::GuestResult;
use wasmtime::component::{InstancePre, Linker, ResourceTable, Val};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

const WARMUP: usize = 100;
const ROUNDS: usize = 10;
const PER_ROUND: usize = 200;

/// A server answering every request with 1 KiB, one thread per
/// connection (each sample opens its own).
fn serve() -> Option<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").ok()?;
    let port = listener.local_addr().ok()?.port();
    std::thread::spawn(move || {
        let body = "x".repeat(1024);
        for stream in listener.incoming().flatten() {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Some(port)
}

struct Bare {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Bare {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: wasmtime_wasi_http::default_hooks(),
        }
    }
}

/// WASI, wasi:http, and a no-op `gatehouse:executor/log`: what `fetch`
/// imports.
fn bare_linker(engine: &Engine) -> wasmtime::Result<Linker<Bare>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)?;
    linker.instance("gatehouse:executor/types@0.1.0")?;
    linker
        .instance("gatehouse:executor/log@0.1.0")?
        .func_new("log", |_, _, _, _| Ok(()))?;
    Ok(linker)
}

/// One `run(input)` on a fresh instance of `pre`, which must answer 200.
fn bare_call(pre: &InstancePre<Bare>, input: &str) -> bool {
    let mut store = Store::new(
        pre.engine(),
        Bare {
            wasi: WasiCtxBuilder::new().build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
        },
    );
    // Never interrupted: no epoch ticks on this engine.
    store.set_epoch_deadline(u64::MAX / 2);
    let Ok(instance) = pre.instantiate(&mut store) else {
        return false;
    };
    let Some(run) = instance.get_func(&mut store, "run") else {
        return false;
    };
    let mut results = [Val::Bool(false)];
    if run
        .call(&mut store, &[Val::String(input.into())], &mut results)
        .is_err()
    {
        return false;
    }
    matches!(&results[0], Val::Result(Ok(Some(v))) if matches!(&**v, Val::String(s) if s.contains("\"status\":200")))
}

fn p(sorted: &[f64], q: usize) -> f64 {
    sorted[(sorted.len() * q / 100).min(sorted.len() - 1)]
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let component = root.join("guests/target/wasm32-wasip2/release/fetch.wasm");
    if !component.exists() {
        eprintln!("the guests are not built: run ./setup.sh first");
        return;
    }
    let Some(port) = serve() else {
        eprintln!("cannot start the server");
        return;
    };
    let tmp = std::env::temp_dir().join(format!("gatehouse-bench-http-{}", std::process::id()));
    let ws = tmp.join("ws");
    let secret = tmp.join("token");
    if std::fs::create_dir_all(&ws).is_err() || std::fs::write(&secret, "bench-token").is_err() {
        return;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).is_err() {
            return;
        }
    }
    let base = format!("http://127.0.0.1:{port}");
    let manifest_path = tmp.join("fetch.toml");
    let manifest = format!(
        "name = \"fetch\"\ncomponent = \"{}\"\n[[capabilities]]\nname = \"network:sites\"\ntarget = \"{base}/**\"\n[[capabilities]]\nname = \"provider:access\"\ntarget = \"bench\"\n",
        component.display()
    );
    if std::fs::write(&manifest_path, manifest).is_err() {
        return;
    }
    let Ok(fetch) = Manifest::load(&manifest_path) else {
        eprintln!("the bench's manifest does not load");
        return;
    };
    let Ok(workspace) = ws.canonicalize().map(|p| p.display().to_string()) else {
        return;
    };
    let input = serde_json::json!({ "url": format!("{base}/data") }).to_string();

    // (b) gatehouse, at Full (no approval), with a provider.
    let mut config = HostConfig::safe_default("bench");
    config.providers.push(ProviderDef {
        name: "bench".into(),
        base_urls: vec![base.clone()],
        header: "Authorization".into(),
        format: "Bearer {value}".into(),
        value: ValueSource::File(secret.clone()),
    });
    let state = StatePaths::under(&tmp.join("state"), None, None);
    let mut options = HostOptions::new(config, state, workspace, vec![fetch]);
    options.level = Some(Level::Full);
    let Ok(host) = Host::open(options) else {
        eprintln!("the host does not open");
        return;
    };
    let turn = || {
        let outcome = host.run(TurnRequest::new("fetch", "main", &input), &NoOne);
        // The guest's own output, looked at as the bare side looks at its
        // result: the check is not what is measured.
        matches!(&outcome.end, TurnEnd::Ran { run } if matches!(
            &run.result,
            GuestResult::Ok { output } if output.contains("\"status\":200")
        ))
    };

    // (a) bare wasmtime-wasi-http.
    // The engine a host builds by default (epoch interruption on: every
    // gatehouse run needs it for its deadline), built once more here.
    let Ok(sandbox) = gatehouse::sandbox::Sandbox::new(
        &tmp.join("bare-cache"),
        gatehouse::sandbox::Limits::default().memory_bytes,
    ) else {
        return;
    };
    let engine = sandbox.engine().clone();
    let Some(pre) = wasmtime::component::Component::from_file(&engine, &component)
        .ok()
        .and_then(|c| {
            bare_linker(&engine)
                .and_then(|l| l.instantiate_pre(&c))
                .ok()
        })
    else {
        eprintln!("the bare linker cannot instantiate `fetch`");
        return;
    };
    let bare = || bare_call(&pre, &input);

    for _ in 0..WARMUP {
        if !bare() || !turn() {
            eprintln!("a warm-up request failed");
            return;
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for (samples, f) in [(&mut a, &bare as &dyn Fn() -> bool), (&mut b, &turn)] {
            for _ in 0..PER_ROUND {
                let start = Instant::now();
                if !f() {
                    eprintln!("a request failed");
                    return;
                }
                samples.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let n = ROUNDS * PER_ROUND;
    println!("| one GET of 1 KiB through `fetch` ({n} samples each, {ROUNDS} interleaved rounds) | p50 µs | p99 µs |");
    println!("|---|---|---|");
    println!(
        "| (a) bare wasmtime-wasi-http, default sender, no policy | {:.1} | {:.1} |",
        p(&a, 50),
        p(&a, 99)
    );
    println!(
        "| (b) gatehouse turn: decision, vetting, provider header, audit | {:.1} | {:.1} |",
        p(&b, 50),
        p(&b, 99)
    );
    println!(
        "\n(b)/(a) p50 {:.2}x (target ≤ 1.2x)",
        p(&b, 50) / p(&a, 50)
    );
    println!(
        "{}",
        serde_json::json!({
            "bare_http_p50_us": p(&a, 50),
            "gatehouse_http_p50_us": p(&b, 50),
            "bare_http_p99_us": p(&a, 99),
            "gatehouse_http_p99_us": p(&b, 99),
            "ratio_p50": p(&b, 50) / p(&a, 50),
        })
    );
}
