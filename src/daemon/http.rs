//! `gatehouse daemon --listen`: streamable HTTP beside the socket, each
//! actor known by its own bearer token (HTTP has no peer credentials).

use std::sync::Arc;

use super::wire::Narrow;
use super::{Daemon, DaemonError, DaemonHttp};

impl Daemon {
    /// Starts streamable HTTP on `h.listen`: every actor with `uids` at
    /// its default workspace and level, picked by its bearer token
    /// (`h.tokens/NAME.token`, made when missing). The address bound and
    /// the task serving it.
    pub(super) async fn http(
        self: Arc<Daemon>,
        h: DaemonHttp,
    ) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>), DaemonError> {
        use crate::serve::ServeHttpError;
        if !h.listen.ip().is_loopback() {
            return Err(ServeHttpError::NotLoopback(h.listen).into());
        }
        let daemon = self.clone();
        let routes = tokio::task::spawn_blocking(move || {
            let mut routes = Vec::new();
            for (actor, a) in &daemon.config.actors {
                if a.uids.is_empty() {
                    continue;
                }
                let token =
                    crate::serve::http_token_file(&h.tokens.join(format!("{actor}.token")))?;
                let failed = |why: String| DaemonError::Actor {
                    actor: actor.clone(),
                    why,
                };
                let placement = daemon
                    .place_actor(actor, &Narrow::default())
                    .map_err(|r| failed(r.message))?;
                let server = daemon.server(&placement).map_err(failed)?;
                routes.push((token, crate::serve::http_service(&server), server));
            }
            Ok::<_, DaemonError>(routes)
        })
        .await
        .map_err(|e| DaemonError::Actor {
            actor: String::new(),
            why: e.to_string(),
        })??;
        let listener =
            tokio::net::TcpListener::bind(h.listen)
                .await
                .map_err(|e| ServeHttpError::Bind {
                    addr: h.listen,
                    source: crate::util::IoCause(e),
                })?;
        let addr = listener.local_addr().unwrap_or(h.listen);
        let route: crate::serve::HttpRoute = Arc::new(move |given| {
            routes
                .iter()
                .find(|(token, _, _)| crate::serve::same_token(given, token))
                .map(|(_, service, server)| (service.clone(), server.clone()))
        });
        let task = tokio::spawn(crate::serve::serve_http_routed(
            listener,
            route,
            "unauthorized: give your actor's token (`<state>/daemon-tokens/NAME.token`) as `Authorization: Bearer`",
        ));
        Ok((addr, task))
    }
}
