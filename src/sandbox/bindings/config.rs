//! `config:read` → `wasi:config/store`: the granted names of the host's
//! `[values]`, read-only. Linked only with the grant. A name the plan does
//! not grant reads as absent, as a name the host does not define does,
//! and `get-all` lists only granted names: a guest learns nothing of what
//! it was not given.
//!
//! The values are the unit's runtime, taken from the configuration when
//! the host opens (like wasmtime's `wasi-config`, whose interface this
//! is); they are not credentials (those are `[providers]`, which the
//! guest never sees).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use wasmtime::component::{HasData, Linker};

use super::wit::wasi::config::store;
use super::{Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::Capability;
use crate::sandbox::HostState;

/// The names of `[values]` that `config:read` was granted on (empty:
/// nothing linked).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConfigPart {
    /// The names the guest may read.
    pub names: Vec<String>,
}

/// The values unit.
pub struct Config;

/// The granted names that the host defines, with their values.
#[derive(Debug, Default)]
pub struct ConfigState {
    given: Vec<(String, String)>,
}

impl Unit for Config {
    type Part = ConfigPart;
    type State = ConfigState;
    /// `[values]`, as the host was opened with.
    type Runtime = Arc<BTreeMap<String, String>>;
    const FILLED_BY: &'static [Capability] = &[Capability::ConfigRead];

    fn open(cx: &Open<'_>) -> Result<Self::Runtime, OpenError> {
        Ok(Arc::new(cx.config.values.clone()))
    }

    fn allow(part: &mut ConfigPart, _: Capability, target: Option<&str>) {
        if let Some(name) = target.filter(|t| !part.names.iter().any(|n| n == t)) {
            part.names.push(name.to_string());
        }
    }

    /// The part's names that `[values]` defines, with their values.
    ///
    /// # Security
    /// Hands the guest the values of the part's names.
    fn prepare(
        part: &ConfigPart,
        values: &Self::Runtime,
        _: &mut Prepare<'_>,
    ) -> Result<ConfigState, PrepareError> {
        let given = part
            .names
            .iter()
            .filter_map(|n| values.get(n).map(|v| (n.clone(), v.clone())))
            .collect();
        Ok(ConfigState { given })
    }

    fn describe(_: &ConfigPart, state: &ConfigState, out: &mut Vec<Cow<'static, str>>) {
        out.extend(
            state
                .given
                .iter()
                .map(|(n, _)| Cow::Owned(format!("config `{n}`"))),
        );
    }
}

/// What the binding works on: the run's values.
pub struct ConfigView<'a> {
    /// The run's values.
    pub state: &'a ConfigState,
}

impl store::Host for ConfigView<'_> {
    fn get(&mut self, key: String) -> Result<Option<String>, store::Error> {
        Ok(self
            .state
            .given
            .iter()
            .find(|(n, _)| *n == key)
            .map(|(_, v)| v.clone()))
    }

    fn get_all(&mut self) -> Result<Vec<(String, String)>, store::Error> {
        Ok(self.state.given.clone())
    }
}

struct HasConfig;

impl HasData for HasConfig {
    type Data<'a> = ConfigView<'a>;
}

/// Links `wasi:config/store`.
///
/// # Security
/// Gives the guest the state's values; the table links it only with
/// `config:read` granted.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    store::add_to_linker::<HostState, HasConfig>(linker, |s| ConfigView { state: &s.config })
}
