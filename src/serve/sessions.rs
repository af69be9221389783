//! The HTTP sessions of a server: the running turns of each, so a client
//! that ends its session (`DELETE`) stops them at once.

use rmcp::service::{RequestContext, RoleServer};

use super::Server;
use crate::util::lock;

/// The cancel switches of the running turns, by HTTP session.
#[derive(Default)]
pub(super) struct SessionTurns {
    next: u64,
    running: std::collections::HashMap<String, Vec<(u64, crate::host::CancelHandle)>>,
}

/// The HTTP session a call came in on, if it came over HTTP.
pub(super) fn session_of(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .extensions
        .get::<hyper::http::request::Parts>()
        .and_then(|p| p.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

impl Server {
    /// Cancels the running turns of HTTP session `session`: its client
    /// ended it (`DELETE`). Each ends within one epoch tick, its journal
    /// finished and its audit written.
    pub fn end_session(&self, session: &str) {
        let turns = lock(&self.inner.sessions).running.remove(session);
        for (_, cancel) in turns.into_iter().flatten() {
            cancel.cancel();
        }
    }

    /// Registers a running turn's cancel switch under its session; the
    /// key to [`Server::unregister`] it with.
    pub(super) fn register(&self, session: &str, cancel: crate::host::CancelHandle) -> u64 {
        let mut s = lock(&self.inner.sessions);
        s.next += 1;
        let key = s.next;
        s.running
            .entry(session.to_string())
            .or_default()
            .push((key, cancel));
        key
    }

    pub(super) fn unregister(&self, session: &str, key: u64) {
        let mut s = lock(&self.inner.sessions);
        if let Some(list) = s.running.get_mut(session) {
            list.retain(|(k, _)| *k != key);
            if list.is_empty() {
                s.running.remove(session);
            }
        }
    }
}
