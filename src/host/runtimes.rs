//! What the host keeps for the life of the process besides its policy:
//! the executors it knows, and each unit's runtime
//! ([`crate::sandbox::Runtimes`]: the HTTP client and providers, the
//! memory store, the host's environment, `[values]`), opened once from
//! the configuration and the stores. Every turn shares them, delegated
//! ones included (they hold the same [`Runtimes`]); a turn's services
//! ([`super::services`]) hand them to its run, whose units take only
//! what their parts of its plan allow.

use std::sync::Arc;

use crate::config::HostConfig;
use crate::manifest::Manifest;
use crate::sandbox::{Environment, Open, OpenError};
use crate::state::Stores;
use crate::util::watch::Watcher;

/// What the host keeps for the life of the process.
pub(crate) struct Runtimes {
    /// The executors this host knows: what a turn or a `delegate:call`
    /// may name.
    pub manifests: Arc<Vec<Manifest>>,
    /// Each unit's runtime.
    pub units: Arc<crate::sandbox::Runtimes>,
}

impl Runtimes {
    /// The runtimes of a host of `config` and `stores`, knowing
    /// `manifests`, whose units read files under `watcher`'s watch.
    pub fn open(
        config: &HostConfig,
        stores: &Stores,
        manifests: Vec<Manifest>,
        watcher: Option<Arc<Watcher>>,
    ) -> Result<Runtimes, OpenError> {
        // The host's edge: the one place a unit's runtime reads the
        // process's environment from.
        let environment: Environment = Arc::new(|name: &str| std::env::var(name).ok());
        let units = crate::sandbox::Runtimes::open(&Open {
            config,
            stores,
            watcher,
            environment,
        })?;
        Ok(Runtimes {
            manifests: Arc::new(manifests),
            units: Arc::new(units),
        })
    }
}
