//! `env:read` → only the named environment variables, through
//! `wasi:cli/environment` (baseline: linked for every guest, empty without
//! the grant).

use std::borrow::Cow;

use serde::Serialize;

use super::{Environment, Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::Capability;

/// The variables `env:read` was granted on (empty: the guest sees none).
#[derive(Debug, Clone, Default, Serialize)]
pub struct EnvPart {
    /// The variable names the guest may read.
    pub names: Vec<String>,
}

impl EnvPart {
    /// The part's variables that are set on the host, with their values,
    /// read now through the host's `environment`.
    pub fn values(&self, environment: &Environment) -> Vec<(String, String)> {
        self.names
            .iter()
            .filter_map(|n| environment(n).map(|v| (n.clone(), v)))
            .collect()
    }
}

/// The environment unit.
pub struct Env;

/// The names of the variables the guest was given (granted and set).
#[derive(Debug, Default)]
pub struct EnvGiven(pub Vec<String>);

impl Unit for Env {
    type Part = EnvPart;
    type State = EnvGiven;
    /// The host's environment, as the host reads it.
    type Runtime = Environment;
    const FILLED_BY: &'static [Capability] = &[Capability::EnvRead];

    fn open(cx: &Open<'_>) -> Result<Environment, OpenError> {
        Ok(cx.environment.clone())
    }

    fn allow(part: &mut EnvPart, _: Capability, target: Option<&str>) {
        part.names.extend(target.map(str::to_string));
    }

    /// Copies the granted variables that are set on the host, read now
    /// through the host's environment; nothing else.
    ///
    /// # Security
    /// Hands the guest the values of the part's variables.
    fn prepare(
        part: &EnvPart,
        environment: &Environment,
        cx: &mut Prepare<'_>,
    ) -> Result<EnvGiven, PrepareError> {
        let values = part.values(environment);
        for (name, value) in &values {
            cx.wasi.env(name, value);
        }
        Ok(EnvGiven(values.into_iter().map(|(n, _)| n).collect()))
    }

    fn describe(_: &EnvPart, given: &EnvGiven, out: &mut Vec<Cow<'static, str>>) {
        out.extend(given.0.iter().map(|n| Cow::Owned(format!("env `{n}`"))));
    }
}
