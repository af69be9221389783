//! `env:read` → only the named environment variables, through
//! `wasi:cli/environment` (baseline: linked for every guest, empty without
//! the grant).

use std::borrow::Cow;

use serde::Serialize;

use super::{Prepare, PrepareError, Unit};

/// The variables `env:read` was granted on (empty: the guest sees none).
#[derive(Debug, Clone, Default, Serialize)]
pub struct EnvPart {
    /// The variable names the guest may read.
    pub names: Vec<String>,
}

/// The environment unit.
pub struct Env;

/// The names of the variables the guest was given (granted and set).
#[derive(Debug, Default)]
pub struct EnvGiven(pub Vec<String>);

impl Unit for Env {
    type Part = EnvPart;
    type State = EnvGiven;

    /// Copies the granted variables that are set on the host (their values
    /// as the host read them into the services); nothing else.
    ///
    /// # Security
    /// Hands the guest the values of the part's variables.
    fn prepare(part: &EnvPart, cx: &mut Prepare<'_>) -> Result<EnvGiven, PrepareError> {
        let mut given = Vec::new();
        for (name, value) in &cx.services.env {
            // Only what the part names, whatever the services hold.
            if part.names.contains(name) {
                cx.wasi.env(name, value);
                given.push(name.clone());
            }
        }
        Ok(EnvGiven(given))
    }

    fn describe(_: &EnvPart, given: &EnvGiven, out: &mut Vec<Cow<'static, str>>) {
        out.extend(given.0.iter().map(|n| Cow::Owned(format!("env `{n}`"))));
    }
}
