//! The process environment gatehouse reads, read once and passed down.

use std::path::{Path, PathBuf};

/// The environment variables that change where gatehouse looks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostEnv {
    /// `$HOME`: where `~` points, and the base of the default directories.
    pub home: Option<PathBuf>,
    /// `$USER` (else `$LOGNAME`): the default actor's sender.
    pub login: Option<String>,
    /// `$GATEHOUSE_CONFIG`: the configuration file or directory.
    pub config: Option<PathBuf>,
    /// `$GATEHOUSE_STATE_DIR`: the state directory.
    pub state_dir: Option<PathBuf>,
    /// `$GATEHOUSE_GRANTS_DB`: the grants database, wherever the state is.
    pub grants_db: Option<PathBuf>,
    /// `$GATEHOUSE_HISTORY_DIR`: the history directory, wherever the state is.
    pub history_dir: Option<PathBuf>,
    /// `$GATEHOUSE_DATABASE_URL`: the PostgreSQL database of a fleet's
    /// shared state; overrides `[state] database_url`.
    pub database_url: Option<String>,
    /// `$GATEHOUSE_NODE`: this host's name in a fleet's history index.
    pub node: Option<String>,
    /// `$XDG_STATE_HOME`: the state directory is `gatehouse` in it.
    pub xdg_state_home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`: the configuration directory is `gatehouse` in it.
    pub xdg_config_home: Option<PathBuf>,
    /// `$LISTEN_PID` is this process and `$LISTEN_FDS` at least 1: systemd
    /// passed it a listening socket as descriptor 3 (a socket unit's
    /// activation of `gatehouse daemon`).
    pub listen_fds: bool,
}

fn var_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl HostEnv {
    /// Reads `HOME`, `USER`/`LOGNAME`, `GATEHOUSE_CONFIG`,
    /// `GATEHOUSE_STATE_DIR`, `GATEHOUSE_GRANTS_DB`, `GATEHOUSE_HISTORY_DIR`,
    /// `GATEHOUSE_DATABASE_URL`, `GATEHOUSE_NODE`,
    /// `XDG_STATE_HOME`, `XDG_CONFIG_HOME`, `LISTEN_PID` and `LISTEN_FDS`.
    pub fn from_process() -> HostEnv {
        HostEnv {
            home: var_path("HOME"),
            login: std::env::var("USER")
                .ok()
                .or_else(|| std::env::var("LOGNAME").ok())
                .filter(|s| !s.is_empty()),
            config: var_path("GATEHOUSE_CONFIG"),
            state_dir: var_path("GATEHOUSE_STATE_DIR"),
            grants_db: var_path("GATEHOUSE_GRANTS_DB"),
            history_dir: var_path("GATEHOUSE_HISTORY_DIR"),
            database_url: std::env::var("GATEHOUSE_DATABASE_URL")
                .ok()
                .filter(|s| !s.is_empty()),
            node: std::env::var("GATEHOUSE_NODE")
                .ok()
                .filter(|s| !s.is_empty()),
            xdg_state_home: var_path("XDG_STATE_HOME"),
            xdg_config_home: var_path("XDG_CONFIG_HOME"),
            listen_fds: std::env::var("LISTEN_PID")
                .ok()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|p| p == std::process::id())
                && std::env::var("LISTEN_FDS")
                    .ok()
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| n >= 1),
        }
    }

    /// The configuration directory: `$XDG_CONFIG_HOME/gatehouse`, else
    /// `~/.config/gatehouse`.
    pub fn config_dir(&self) -> Option<PathBuf> {
        self.xdg_config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".config")))
            .map(|d| d.join("gatehouse"))
    }

    /// Every place configuration and state are found in (see
    /// [`super::Places`]); `explicit` is `--config`.
    pub fn places(&self, explicit: Option<&Path>) -> super::Places {
        let config_dirs = [
            self.xdg_config_home.as_ref().map(|d| d.join("gatehouse")),
            self.home.as_ref().map(|h| h.join(".config/gatehouse")),
        ];
        let config = [explicit.map(Path::to_path_buf), self.config.clone()]
            .into_iter()
            .chain(config_dirs)
            .flatten()
            .collect();
        let state = [
            self.state_dir.clone(),
            self.xdg_state_home.as_ref().map(|d| d.join("gatehouse")),
            self.home.as_ref().map(|h| h.join(".local/state/gatehouse")),
            self.grants_db.clone(),
            self.history_dir.clone(),
        ]
        .into_iter()
        .flatten()
        .collect();
        super::Places { config, state }
    }

    /// Where state lives (see [`StatePaths`]).
    pub fn state_paths(&self) -> StatePaths {
        let state_dir = self
            .state_dir
            .clone()
            .or_else(|| self.xdg_state_home.as_ref().map(|d| d.join("gatehouse")))
            .or_else(|| self.home.as_ref().map(|h| h.join(".local/state/gatehouse")))
            // No home at all: a directory of the current user's, never a
            // shared one.
            .unwrap_or_else(|| PathBuf::from(".gatehouse-state"));
        let mut state =
            StatePaths::under(&state_dir, self.grants_db.clone(), self.history_dir.clone());
        state.database_url = self.database_url.clone();
        state.node = self.node.clone();
        state
    }
}

/// The state directory and what lives in it.
///
/// Defaults: `$GATEHOUSE_STATE_DIR`, else `$XDG_STATE_HOME/gatehouse`, else
/// `~/.local/state/gatehouse`; `grants.db` (`$GATEHOUSE_GRANTS_DB`),
/// `history/` (`$GATEHOUSE_HISTORY_DIR`), `cache/`, the pending-approval
/// queue `approvals.db` and the audit chain `audit-chain.jsonl` inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePaths {
    /// The state directory.
    pub state_dir: PathBuf,
    /// The grants database (`grants.db` in the state directory by default).
    pub grants_db: PathBuf,
    /// The history of turns (`history/` in the state directory by default).
    pub history_dir: PathBuf,
    /// The compiled-component cache, `cache/` in the state directory.
    pub cache_dir: PathBuf,
    /// The pending-approval queue, always in the state directory.
    pub approvals_db: PathBuf,
    /// The PostgreSQL database of a fleet's shared state (grants, ...):
    /// `$GATEHOUSE_DATABASE_URL`, else `[state] database_url`; `None`:
    /// the SQLite files above. Set by [`HostEnv::state_paths`] and
    /// [`StatePaths::with_config`].
    pub database_url: Option<String>,
    /// This host's name in a fleet's history index: `$GATEHOUSE_NODE`,
    /// else the machine's host name ([`StatePaths::node_name`]).
    pub node: Option<String>,
    /// The hash-chained audit (`gatehouse history verify`),
    /// `audit-chain.jsonl`, always in the state directory.
    pub audit_chain: PathBuf,
    /// Where builds before the chain's file kept it (`audit.db`): imported
    /// into [`StatePaths::audit_chain`] when that is first written.
    pub audit_db: PathBuf,
}

impl StatePaths {
    /// The paths of a state directory, with the grants database and history overridden
    /// where given.
    pub fn under(
        state_dir: &Path,
        grants_db: Option<PathBuf>,
        history_dir: Option<PathBuf>,
    ) -> StatePaths {
        StatePaths {
            state_dir: state_dir.to_path_buf(),
            grants_db: grants_db.unwrap_or_else(|| state_dir.join("grants.db")),
            history_dir: history_dir.unwrap_or_else(|| state_dir.join("history")),
            cache_dir: state_dir.join("cache"),
            approvals_db: state_dir.join("approvals.db"),
            database_url: None,
            node: None,
            audit_chain: state_dir.join("audit-chain.jsonl"),
            audit_db: state_dir.join("audit.db"),
        }
    }

    /// This host's name in a fleet: [`StatePaths::node`], else the
    /// kernel's host name, else `node`. Two nodes of one machine should
    /// be given names (`GATEHOUSE_NODE`): the index tells them apart by it.
    pub fn node_name(&self) -> String {
        self.node.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "node".to_string())
        })
    }

    /// The memory store of the embedded backend (`memory.db` in the state
    /// directory; a fleet's is in its database).
    pub fn memory_db(&self) -> PathBuf {
        self.state_dir.join("memory.db")
    }

    /// These paths with `config`'s `[state] database_url` where the
    /// environment named none (`$GATEHOUSE_DATABASE_URL` wins).
    pub fn with_config(mut self, config: &super::HostConfig) -> StatePaths {
        if self.database_url.is_none() {
            self.database_url = config.database_url.clone();
        }
        self
    }
}
