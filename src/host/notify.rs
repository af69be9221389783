//! `[approvals] notify`: the person hears of a queued approval.
//!
//! Each entry the host queues is announced by one JSON `POST` to the
//! configured URL (the pending id, the actor, the executor, the items and
//! the input's preview), over the host's TLS settings (`[network]
//! ca_file` and `resolve`: the HTTP unit's client). The notices go
//! through a bounded queue to one thread of their own, so a slow or dead
//! receiver never delays a turn: a notice that cannot be handed over (the
//! queue is full) is dropped and logged; one that fails is tried three
//! times in all (10 s each, 1 s and then 4 s apart), then logged. Nothing
//! waits for it: the entry is in the queue whatever the notice does.

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use crate::config::{NotifyDef, ValueSource};
use crate::policy::UtcTime;
use crate::sandbox::http::HttpClient;
use crate::state::approvals::{
    ApprovalBackend, QueueAnswer, QueueEntry, QueueError, QueuedItem, TurnKey, Verdict,
};

/// How many notices may wait for the sender.
const WAITING: usize = 64;
/// One attempt's bound: connecting, the request and the answer's head.
const ATTEMPT: Duration = Duration::from_secs(10);
/// The pauses before the second and third attempts.
const BACKOFF: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// How long a host that closes waits for the notices still to be sent
/// (a one-shot `run` ends right after it queued one).
const AT_CLOSE: Duration = Duration::from_secs(3);

/// The sender of notices, on a thread of its own.
pub(crate) struct Notifier {
    /// `None` once closed.
    tx: Option<SyncSender<Value>>,
    /// Disconnected when the sender's thread ends.
    done: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Drop for Notifier {
    fn drop(&mut self) {
        // No more notices: the thread ends after those waiting, and is
        // waited for a bounded time.
        drop(self.tx.take());
        let _ = crate::util::lock(&self.done).recv_timeout(AT_CLOSE);
    }
}

impl Notifier {
    /// Starts the sender of `def`'s notices over `client`.
    pub fn start(def: NotifyDef, client: Arc<HttpClient>) -> std::io::Result<Notifier> {
        let (tx, rx) = sync_channel::<Value>(WAITING);
        let (ended, done) = sync_channel::<()>(0);
        std::thread::Builder::new()
            .name("gatehouse-notify".into())
            .spawn(move || {
                let _ended = ended;
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::warn!("approval notices are off: no runtime: {e}");
                        return;
                    }
                };
                while let Ok(notice) = rx.recv() {
                    rt.block_on(deliver(&def, &client, &notice));
                }
            })?;
        Ok(Notifier {
            tx: Some(tx),
            done: std::sync::Mutex::new(done),
        })
    }

    /// Announces `entry`, without waiting.
    pub fn queued(&self, entry: &QueueEntry) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(notice(entry)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => tracing::warn!(
                "approval `{}`: not announced: {WAITING} notices already wait for the receiver",
                entry.id
            ),
            Err(TrySendError::Disconnected(_)) => tracing::warn!(
                "approval `{}`: not announced: the notice sender stopped",
                entry.id
            ),
        }
    }
}

/// The JSON a receiver gets for `entry`.
fn notice(entry: &QueueEntry) -> Value {
    json!({
        "pending_id": entry.id,
        "actor": entry.actor,
        "executor": entry.executor,
        "items": entry.items.iter().map(|i| json!({
            "capability": i.capability.as_str(),
            "target": i.target,
            "reason": i.reason,
            "critical": i.critical,
        })).collect::<Vec<_>>(),
        "input_preview": entry.input_preview,
        "queued_at": entry.queued_at.to_string(),
        "expires_at": entry.expires_at.to_string(),
    })
}

/// Sends `notice`, up to three times; logs the outcome.
async fn deliver(def: &NotifyDef, client: &HttpClient, notice: &Value) {
    let id = notice["pending_id"].as_str().unwrap_or_default();
    let mut last = String::new();
    for attempt in 0..=BACKOFF.len() {
        if attempt > 0 {
            tokio::time::sleep(BACKOFF[attempt - 1]).await;
        }
        match tokio::time::timeout(ATTEMPT, post(def, client, notice)).await {
            Ok(Ok(())) => {
                tracing::info!("approval `{id}` announced to `{}`", def.url);
                return;
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = format!("no answer within {} s", ATTEMPT.as_secs()),
        }
    }
    tracing::warn!(
        "approval `{id}`: the notice to `{}` failed {} times, the last: {last}",
        def.url,
        BACKOFF.len() + 1
    );
}

/// The header's value, read now.
fn header_value(format: &str, source: &ValueSource) -> Result<String, String> {
    let value = match source {
        ValueSource::Env(var) => std::env::var(var)
            .map_err(|_| format!("the variable `{var}` of its header is not set"))?,
        ValueSource::File(path) => {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(path)
                .map_err(|e| format!("its header's file `{}`: {e}", path.display()))?;
            if meta.mode() & 0o077 != 0 {
                return Err(format!(
                    "its header's file `{}` may be read by others than its owner (mode {:o}): not used",
                    path.display(),
                    meta.mode() & 0o777
                ));
            }
            std::fs::read_to_string(path)
                .map_err(|e| format!("its header's file `{}`: {e}", path.display()))?
                .trim_end_matches(['\n', '\r'])
                .to_string()
        }
    };
    Ok(format.replace("{value}", &value))
}

/// One `POST` of `notice`; a status other than 2xx is a failure.
async fn post(def: &NotifyDef, client: &HttpClient, notice: &Value) -> Result<(), String> {
    let uri: http::Uri = def.url.parse().map_err(|_| "not a url".to_string())?;
    let host = uri.host().unwrap_or_default().to_string();
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let addrs: Vec<std::net::SocketAddr> = match client.resolve.get(&bare) {
        Some(ips) => ips.iter().map(|ip| (*ip, port).into()).collect(),
        None => tokio::net::lookup_host((bare.as_str(), port))
            .await
            .map_err(|e| format!("cannot resolve `{bare}`: {e}"))?
            .collect(),
    };
    let mut tcp = None;
    let mut why = format!("`{bare}` has no address");
    for a in addrs {
        match tokio::net::TcpStream::connect(a).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => why = format!("cannot connect to {a}: {e}"),
        }
    }
    let tcp = tcp.ok_or(why)?;
    let body = serde_json::to_vec(notice).map_err(|e| e.to_string())?;
    let mut request = http::Request::post(&uri)
        .header(
            http::header::HOST,
            uri.authority().map_or(host.as_str(), |a| a.as_str()),
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, "gatehouse");
    if let Some((name, format, source)) = &def.header {
        request = request.header(name.as_str(), header_value(format, source)?);
    }
    let request = request
        .body(Full::new(bytes::Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let status = if https {
        let name = rustls::pki_types::ServerName::try_from(bare.clone())
            .map_err(|_| format!("`{bare}` is not a tls server name"))?;
        let tls = tokio_rustls::TlsConnector::from(client.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        send(hyper_util::rt::TokioIo::new(tls), request).await?
    } else {
        send(hyper_util::rt::TokioIo::new(tcp), request).await?
    };
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered {status}"))
    }
}

/// Sends `request` on `io` over HTTP/1.1; the answer's status (its body
/// read and dropped).
async fn send<I>(
    io: I,
    request: http::Request<Full<bytes::Bytes>>,
) -> Result<http::StatusCode, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("http: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("http: {e}"))?;
    let status = response.status();
    let _ = response.into_body().collect().await;
    Ok(status)
}

/// A queue that announces each entry it queues.
pub(crate) struct Announcing {
    /// The queue.
    pub inner: Arc<dyn ApprovalBackend>,
    /// Its announcer.
    pub notifier: Notifier,
}

impl ApprovalBackend for Announcing {
    fn enqueue(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        input: &str,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        let entry = self.inner.enqueue(turn, key, items, input, now)?;
        self.notifier.queued(&entry);
        Ok(entry)
    }

    fn take(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        self.inner.take(turn, key, items, now)
    }

    fn take_line(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        line: &[String],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        self.inner.take_line(turn, key, items, line, now)
    }

    fn dropped(&self) -> Result<Vec<(String, u64)>, QueueError> {
        self.inner.dropped()
    }

    fn list(&self, all: bool, now: UtcTime) -> Result<Vec<QueueEntry>, QueueError> {
        self.inner.list(all, now)
    }

    fn get(&self, id: &str) -> Result<Option<QueueEntry>, QueueError> {
        self.inner.get(id)
    }

    fn answer(
        &self,
        id: &str,
        answer: QueueAnswer,
        by: Option<&str>,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        self.inner.answer(id, answer, by, now)
    }
}
