//! `executor.toml`: parsing and validation of executor manifests.
//!
//! A manifest names an executor, its wasm component (optionally pinned by
//! sha256), the capabilities it needs with their targets, whether its effects
//! can be undone and how, and, for `code:exec`, the tools it may run:
//!
//! ```toml
//! name = "write-file"
//! description = "writes a file"
//! component = "../../guests/target/wasm32-wasip2/release/write_file.wasm"
//! sha256 = "<64 lowercase hex>"
//! revertible = true
//! reverse_pattern = "restore_blob_backup"
//! input_schema = { type = "object" }
//!
//! [[capabilities]]
//! name = "fs:write"
//! target = "out/**"
//! ```
//!
//! A *command executor* names a host command instead of a component; it
//! runs in the OS sandbox of `code:exec`, its input on stdin and its output
//! what it prints, and must declare `code:exec` on its program:
//!
//! ```toml
//! name = "count-lines"
//! command = ["wc", "-l"]
//! tools = ["wc"]
//!
//! [[capabilities]]
//! name = "code:exec"
//! target = "wc"
//! ```
//!
//! Validation is strict so that a mistake is an error naming the field, not
//! a silently different sandbox: unknown fields, capability names outside
//! the closed registry, targets of the wrong kind, and `revertible = true`
//! without a catalogued reverse pattern are all rejected.

mod error;
mod find;
mod schema;
mod target;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::{Capability, DeclaredCapability, ExecutorDef, TargetKind};

pub use error::ManifestError;
pub use find::{discover, find_by_name};
pub use target::guest_name;

/// The closed catalogue of reverse patterns the undo engine implements.
pub const REVERSE_PATTERNS: [&str; 5] = [
    "swap_src_dst",
    "delete_created_dirs",
    "delete_created_paths",
    "restore_blob_backup",
    "delete_memory_by_id",
];

/// A validated executor manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    /// The manifest file itself.
    pub path: PathBuf,
    /// The executor's name: `[a-z0-9][a-z0-9_-]{0,63}`.
    pub name: String,
    /// One line saying what the executor does; an MCP tool's description.
    pub description: Option<String>,
    /// The component file, resolved against the manifest's directory (not
    /// canonicalized); empty for a command executor.
    pub component: PathBuf,
    /// A command executor's argv: the program (a name looked up in the
    /// fixed program path, or an absolute path) and its arguments; empty
    /// for a component.
    pub command: Vec<String>,
    /// The pinned digest of the component, 64 lowercase hex digits.
    pub sha256: Option<String>,
    /// Whether the executor's effects can be undone (by `reverse_pattern`).
    pub revertible: bool,
    /// One of [`REVERSE_PATTERNS`]; set exactly when `revertible` is true.
    pub reverse_pattern: Option<String>,
    /// Tools the executor may run; non-empty exactly when `code:exec` is
    /// declared.
    pub tools: Vec<String>,
    /// The input's JSON Schema: an object schema (`type = "object"`),
    /// its known keywords checked (see `schema.rs`); a tool's `inputSchema`.
    pub input_schema: Option<serde_json::Value>,
    /// The capabilities it declares (`[[capabilities]]`), each with its target.
    pub capabilities: Vec<ManifestCapability>,
}

/// One declared capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestCapability {
    /// The capability, a name of the closed registry.
    pub capability: Capability,
    /// The target as written (a path glob may still be relative or `~/`);
    /// `None` exactly for capabilities whose target kind is `none`.
    pub target: Option<String>,
    /// For `fs:read` / `fs:write`: the name the guest opens the glob's
    /// directory by (`/data`, `/`), absolute and normalized. Without it a
    /// directory in the workspace keeps its workspace-relative name (`.`,
    /// `out`); a directory outside the workspace must have one.
    pub mount: Option<String>,
    /// For `network:sites`: the HTTP methods allowed on the target
    /// (uppercase); `None`: any.
    pub methods: Option<Vec<String>>,
}

/// A component executor's fields as a program gives them
/// ([`Manifest::from_fields`]): those of `executor.toml`, by name.
#[derive(Debug, Clone, Default)]
pub struct ManifestFields {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// `component`: the component file.
    pub component: Option<String>,
    /// `sha256`: the component's pinned digest.
    pub sha256: Option<String>,
    /// `tools`.
    pub tools: Option<Vec<String>>,
    /// `[[capabilities]]`.
    pub capabilities: Vec<CapabilityFields>,
}

/// One `[[capabilities]]` entry of [`ManifestFields`].
#[derive(Debug, Clone, Default)]
pub struct CapabilityFields {
    /// `name`: a capability of the registry.
    pub name: String,
    /// `target`.
    pub target: Option<String>,
    /// `mount`.
    pub mount: Option<String>,
    /// `methods` (`network:sites` only).
    pub methods: Option<Vec<String>>,
}

/// The file's shape; everything is checked again in [`Manifest::parse`].
/// Its JSON Schema is [`json_schema`].
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    component: Option<String>,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    revertible: bool,
    #[serde(default)]
    reverse_pattern: Option<String>,
    // An `Option` so that `tools = []` is told apart from no `tools`.
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    input_schema: Option<toml::Table>,
    #[serde(default)]
    capabilities: Vec<RawCapability>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawCapability {
    // A string rather than `Capability`, so an unknown name is reported with
    // its field path rather than toml's location only.
    name: String,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    mount: Option<String>,
    /// `network:sites` only: the HTTP methods allowed (default: any).
    #[serde(default)]
    methods: Option<Vec<String>>,
}

/// The JSON Schema of the file's shape, generated from the types that
/// parse it (so it cannot drift from them); `gatehouse manifest schema`
/// adds what the validator knows besides.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RawManifest)).unwrap_or_default()
}

impl Manifest {
    /// Reads, parses and validates the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Manifest::parse(path, &text)
    }

    /// Parses and validates manifest text. `path` is the manifest's file: it
    /// names the file in messages, and `component` is resolved against its
    /// directory. Nothing is read from disk.
    pub fn parse(path: &Path, text: &str) -> Result<Manifest, ManifestError> {
        let raw: RawManifest = toml::from_str(text).map_err(|e| syntax_error(path, text, &e))?;
        validate(path, raw).map_err(|(field, reason)| ManifestError::Invalid {
            file: path.display().to_string(),
            field,
            reason,
        })
    }

    /// A bare component as an executor: named `name`, with `compute:pure`
    /// only (`gatehouse run FILE.wasm`), validated as the manifest file at
    /// `path` holding the same would be. `component` should be absolute.
    pub fn bare(
        path: &Path,
        name: String,
        description: &str,
        component: &Path,
    ) -> Result<Manifest, ManifestError> {
        Manifest::from_fields(
            path,
            ManifestFields {
                name,
                description: Some(description.to_string()),
                component: Some(component.display().to_string()),
                capabilities: vec![CapabilityFields {
                    name: Capability::ComputePure.as_str().to_string(),
                    ..CapabilityFields::default()
                }],
                ..ManifestFields::default()
            },
        )
    }

    /// The manifest a program makes (the conformance suite, `run
    /// FILE.wasm`): `fields`, validated as the manifest file at `path`
    /// holding the same would be, without writing TOML to parse it back.
    pub fn from_fields(path: &Path, fields: ManifestFields) -> Result<Manifest, ManifestError> {
        let raw = RawManifest {
            name: fields.name,
            description: fields.description,
            component: fields.component,
            command: None,
            sha256: fields.sha256,
            revertible: false,
            reverse_pattern: None,
            tools: fields.tools,
            input_schema: None,
            capabilities: fields
                .capabilities
                .into_iter()
                .map(|c| RawCapability {
                    name: c.name,
                    target: c.target,
                    mount: c.mount,
                    methods: c.methods,
                })
                .collect(),
        };
        validate(path, raw).map_err(|(field, reason)| ManifestError::Invalid {
            file: path.display().to_string(),
            field,
            reason,
        })
    }

    /// Hex sha256 of the component file; if `sha256` is pinned and differs ->
    /// [`ManifestError::DigestMismatch`] whose message contains
    /// `DIGEST_MISMATCH`. Missing component file ->
    /// [`ManifestError::ComponentMissing`].
    pub fn verify_component(&self) -> Result<String, ManifestError> {
        let io_error = |source: io::Error| ManifestError::Io {
            path: self.component.clone(),
            source,
        };
        let mut file = match File::open(&self.component) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(ManifestError::ComponentMissing {
                    file: self.path.display().to_string(),
                    component: self.component.clone(),
                })
            }
            Err(e) => return Err(io_error(e)),
        };
        let actual = crate::util::sha256_reader(&mut file).map_err(io_error)?;
        match &self.sha256 {
            Some(expected) if *expected != actual => Err(ManifestError::DigestMismatch {
                component: self.component.clone(),
                expected: expected.clone(),
                actual,
            }),
            _ => Ok(actual),
        }
    }

    /// Resolves declared targets for a turn: path globs relative to
    /// `workspace` (canonical absolute dir) or `home` (for `~/`), others
    /// unchanged; returns the policy's frozen form.
    ///
    /// `sha256` is the pinned digest as written (`None` if unpinned); callers
    /// that verified the component may fill in the actual digest.
    pub fn to_definition(
        &self,
        workspace: &Path,
        home: Option<&Path>,
    ) -> Result<ExecutorDef, ManifestError> {
        let file = self.path.display().to_string();
        let Some(component) = self.component.to_str() else {
            return Err(ManifestError::Invalid {
                file,
                field: "component".to_string(),
                reason: format!("`{}` is not valid UTF-8", self.component.display()),
            });
        };
        let mut capabilities = Vec::with_capacity(self.capabilities.len());
        for (i, cap) in self.capabilities.iter().enumerate() {
            let target = match (&cap.target, cap.capability.target_kind()) {
                (Some(value), TargetKind::PathGlob) => Some(
                    target::resolve_path_target(value, workspace, home).map_err(|reason| {
                        ManifestError::Invalid {
                            file: file.clone(),
                            field: format!("capabilities[{i}].target"),
                            reason,
                        }
                    })?,
                ),
                (other, _) => other.clone(),
            };
            // A directory outside the workspace has no workspace-relative
            // name, and its host path would tell the guest the host's
            // layout: the author names it.
            if let (Some(resolved), None) = (&target, &cap.mount) {
                if cap.capability.target_kind() == TargetKind::PathGlob {
                    target::check_inside_workspace(resolved, workspace).map_err(|reason| {
                        ManifestError::Invalid {
                            file: file.clone(),
                            field: format!("capabilities[{i}].mount"),
                            reason,
                        }
                    })?;
                }
            }
            capabilities.push(DeclaredCapability {
                capability: cap.capability,
                target,
                mount: cap.mount.clone(),
                methods: cap.methods.clone(),
            });
        }
        Ok(ExecutorDef {
            component: component.to_string(),
            command: self.command.clone(),
            sha256: self.sha256.clone(),
            capabilities,
            revertible: self.revertible,
            reverse_pattern: self.reverse_pattern.clone(),
            tools: self.tools.clone(),
        })
    }
}

/// A toml error as a [`ManifestError`], with the line and column toml points
/// at (toml's own rendering is a multi-line snippet, unfit for one-line
/// errors).
pub(crate) fn syntax_error(path: &Path, text: &str, err: &toml::de::Error) -> ManifestError {
    // toml's message may span lines ("invalid string\nexpected ..."); keep
    // the error on one line.
    let message = err
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let detail = match err.span() {
        // A span over the whole document (a missing top-level field) points
        // at nothing in particular; "line 1, column 1" would mislead.
        Some(span) if !covers_document(text, &span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit_once('\n')
                .map_or(before, |(_, last)| last)
                .chars()
                .count()
                + 1;
            format!("line {line}, column {column}: {message}")
        }
        _ => message,
    };
    ManifestError::Toml {
        file: path.display().to_string(),
        detail,
    }
}

/// Whether `span` is the whole document, give or take surrounding blanks.
/// A field that fails its check, and why: (`field`, `reason`).
type Bad = (String, String);

fn bad(field: &str, reason: impl Into<String>) -> Bad {
    (field.to_string(), reason.into())
}

/// The validator: each part of the manifest checked by one function, in
/// the order a reader of the file meets them; the first failure names
/// its field.
fn validate(path: &Path, raw: RawManifest) -> Result<Manifest, Bad> {
    if !is_valid_name(&raw.name) {
        return Err(bad(
            "name",
            format!(
                "invalid executor name `{}`: it must match `[a-z0-9][a-z0-9_-]{{0,63}}`",
                raw.name
            ),
        ));
    }
    let (component, command) = what_runs(path, raw.component.as_deref(), raw.command)?;
    if !command.is_empty() && raw.sha256.is_some() {
        return Err(bad(
            "sha256",
            "only a component can be pinned; a command executor has no component",
        ));
    }
    if let Some(digest) = raw.sha256.as_deref().filter(|d| !is_sha256_hex(d)) {
        return Err(bad(
            "sha256",
            format!("`{digest}` is not 64 lowercase hex digits"),
        ));
    }
    let capabilities = raw
        .capabilities
        .into_iter()
        .enumerate()
        .map(|(i, cap)| capability(i, cap))
        .collect::<Result<Vec<_>, Bad>>()?;
    target::check_mounts_agree(&capabilities)
        .map_err(|(i, why)| (format!("capabilities[{i}].mount"), why))?;
    target::check_guest_names_distinct(&capabilities)
        .map_err(|(i, why)| (format!("capabilities[{i}]"), why))?;
    let declares = |c: Capability| capabilities.iter().any(|d| d.capability == c);
    let tools = tools(declares(Capability::CodeExec), raw.tools)?;
    check_reverse(raw.revertible, raw.reverse_pattern.as_deref(), &declares)?;
    check_command_declared(&command, &capabilities, &tools)?;
    let input_schema = match raw.input_schema {
        None => None,
        Some(table) => {
            let schema = toml_to_json(toml::Value::Table(table), "input_schema")?;
            schema::check(&schema)?;
            Some(schema)
        }
    };
    Ok(Manifest {
        path: path.to_path_buf(),
        name: raw.name,
        description: raw.description,
        component,
        command,
        sha256: raw.sha256,
        revertible: raw.revertible,
        reverse_pattern: raw.reverse_pattern,
        tools,
        input_schema,
        capabilities,
    })
}

/// What the executor runs: its component (resolved against the
/// manifest's directory) or its command line, exactly one of them.
fn what_runs(
    path: &Path,
    component: Option<&str>,
    command: Option<Vec<String>>,
) -> Result<(PathBuf, Vec<String>), Bad> {
    match (component, command) {
        (Some(_), Some(_)) => Err(bad(
            "command",
            "`command` and `component` exclude each other: an executor is one or the other",
        )),
        (None, None) => Err(bad(
            "component",
            "required (or `command`, for an executor that runs a host command)",
        )),
        (Some(""), None) => Err(bad("component", "it is empty")),
        (Some(c), None) => {
            let dir = path.parent().unwrap_or(Path::new(""));
            // `join` keeps an absolute component as it is.
            Ok((dir.join(c), Vec::new()))
        }
        (None, Some(argv)) => {
            check_command(&argv)?;
            Ok((PathBuf::new(), argv))
        }
    }
}

/// A command line: a program without whitespace, no control character
/// in any argument.
fn check_command(argv: &[String]) -> Result<(), Bad> {
    let Some(program) = argv.first() else {
        return Err(bad("command", "it is empty: it must name a program"));
    };
    if program.is_empty() || program.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            "command[0]",
            format!(
                "invalid program `{}`: it must be a non-empty program name or path without whitespace",
                crate::util::printable(program)
            ),
        ));
    }
    if let Some((i, a)) = argv
        .iter()
        .enumerate()
        .find(|(_, a)| a.chars().any(|c| c.is_control()))
    {
        return Err(bad(
            &format!("command[{i}]"),
            format!("`{}` holds a control character", crate::util::printable(a)),
        ));
    }
    Ok(())
}

/// `capabilities[i]`: a known name, a target of its kind, and a mount and
/// methods only where the capability has them.
fn capability(i: usize, cap: RawCapability) -> Result<ManifestCapability, Bad> {
    let Some(capability) = Capability::from_name(&cap.name) else {
        return Err(bad(
            &format!("capabilities[{i}].name"),
            format!("unknown capability `{}`", cap.name),
        ));
    };
    let field = format!("capabilities[{i}].target");
    match (capability.target_kind(), &cap.target) {
        (TargetKind::None, None) => {}
        (TargetKind::None, Some(value)) => {
            return Err(bad(
                &field,
                format!("`{capability}` takes no target, got `{value}`"),
            ))
        }
        (kind, None) => {
            return Err(bad(
                &field,
                format!("`{capability}` needs a target of kind `{}`", kind.as_str()),
            ))
        }
        (TargetKind::PathGlob, Some(value)) => {
            target::parse_path_target(value).map_err(|why| (field.clone(), why))?;
        }
        (kind, Some(value)) => {
            target::check_other_target(kind, value).map_err(|why| (field.clone(), why))?;
        }
    }
    if let Some(mount) = &cap.mount {
        let field = format!("capabilities[{i}].mount");
        if !matches!(capability, Capability::FsRead | Capability::FsWrite) {
            return Err(bad(
                &field,
                format!("`mount` names a directory in the guest: only `fs:read` and `fs:write` have one, not `{capability}`"),
            ));
        }
        target::check_mount(mount).map_err(|why| (field, why))?;
    }
    if let Some(methods) = &cap.methods {
        check_methods(&format!("capabilities[{i}].methods"), capability, methods)?;
    }
    Ok(ManifestCapability {
        capability,
        target: cap.target,
        mount: cap.mount,
        methods: cap
            .methods
            .map(|m| m.iter().map(|x| x.to_ascii_uppercase()).collect()),
    })
}

/// `methods` of a `network:sites` grant: HTTP methods, at least one, and
/// none the host never sends.
fn check_methods(field: &str, capability: Capability, methods: &[String]) -> Result<(), Bad> {
    if capability != Capability::NetworkSites {
        return Err(bad(
            field,
            format!(
                "`methods` are HTTP methods: only `network:sites` has them, not `{capability}`"
            ),
        ));
    }
    if methods.is_empty() {
        return Err(bad(
            field,
            "an empty list allows no request; leave `methods` out to allow any",
        ));
    }
    if let Some(m) = methods
        .iter()
        .find(|m| m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic()))
    {
        return Err(bad(field, format!("`{m}` is not an HTTP method")));
    }
    // The host never sends them (security round 3, item 3): a manifest
    // that lists one asks for what no turn can do.
    if let Some(never) = methods.iter().find(|m| {
        crate::policy::http::NEVER_SENT
            .iter()
            .any(|n| m.eq_ignore_ascii_case(n))
    }) {
        return Err(bad(
            field,
            format!("`{never}` is never sent: gatehouse refuses `TRACE` and `CONNECT` whatever `methods` says"),
        ));
    }
    Ok(())
}

/// `tools`: listed (at least one) exactly when `code:exec` is declared,
/// each a program name or path without whitespace.
fn tools(declares_exec: bool, tools: Option<Vec<String>>) -> Result<Vec<String>, Bad> {
    let tools = match (declares_exec, tools) {
        (true, Some(tools)) if !tools.is_empty() => tools,
        (true, _) => {
            return Err(bad(
                "tools",
                "`code:exec` is declared, so `tools` must list at least one tool",
            ))
        }
        (false, Some(_)) => {
            return Err(bad(
                "tools",
                "`tools` is only allowed when `code:exec` is declared",
            ))
        }
        (false, None) => Vec::new(),
    };
    if let Some((i, tool)) = tools
        .iter()
        .enumerate()
        .find(|(_, t)| t.is_empty() || t.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(bad(
            &format!("tools[{i}]"),
            format!("invalid tool `{tool}`: it must be a non-empty program name or path without whitespace"),
        ));
    }
    Ok(tools)
}

/// `revertible` and `reverse_pattern`: a catalogued pattern exactly when
/// revertible, and one that reverses something the executor declares.
fn check_reverse(
    revertible: bool,
    pattern: Option<&str>,
    declares: &dyn Fn(Capability) -> bool,
) -> Result<(), Bad> {
    let pattern = match (revertible, pattern) {
        (false, None) => return Ok(()),
        (false, Some(pattern)) => {
            return Err(bad(
                "reverse_pattern",
                format!("`{pattern}` is set but `revertible` is false"),
            ))
        }
        (true, None) => {
            return Err(bad(
                "reverse_pattern",
                format!("required when `revertible = true`; one of {}", catalogue()),
            ))
        }
        (true, Some(pattern)) => pattern,
    };
    if !REVERSE_PATTERNS.contains(&pattern) {
        return Err(bad(
            "reverse_pattern",
            format!(
                "unknown reverse pattern `{pattern}`; one of {}",
                catalogue()
            ),
        ));
    }
    // A pattern reverses operations of some capabilities only; an
    // executor that declares none of them claims an undo it cannot have
    // (issue 27, point 9).
    let needs: &[Capability] = match pattern {
        "delete_memory_by_id" => &[Capability::MemoryWrite],
        "restore_blob_backup" => &[Capability::FsWrite, Capability::MemoryWrite],
        // swap_src_dst, delete_created_dirs, delete_created_paths
        _ => &[Capability::FsWrite],
    };
    if !needs.iter().any(|c| declares(*c)) {
        let names: Vec<String> = needs.iter().map(|c| format!("`{c}`")).collect();
        return Err(bad(
            "reverse_pattern",
            format!(
                "`{pattern}` reverses what {} does, and the executor declares none of it",
                names.join(" or ")
            ),
        ));
    }
    Ok(())
}

/// A command executor declares `code:exec` on its program and lists it
/// among its tools.
fn check_command_declared(
    command: &[String],
    capabilities: &[ManifestCapability],
    tools: &[String],
) -> Result<(), Bad> {
    let Some(program) = command.first() else {
        return Ok(());
    };
    let name = crate::policy::command::basename(program);
    let exec_on_it = capabilities
        .iter()
        .any(|c| c.capability == Capability::CodeExec && c.target.as_deref() == Some(name));
    if !exec_on_it {
        return Err(bad(
            "capabilities",
            format!("a command executor must declare `code:exec` with target `{name}`, the program it runs"),
        ));
    }
    if !tools.iter().any(|t| t == name || t == program) {
        return Err(bad(
            "tools",
            format!("`{name}`, the program of `command`, must be listed"),
        ));
    }
    Ok(())
}

fn covers_document(text: &str, span: &std::ops::Range<usize>) -> bool {
    let blank = |s: Option<&str>| s.is_some_and(|s| s.trim().is_empty());
    blank(text.get(..span.start)) && blank(text.get(span.end..))
}

fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match bytes.split_first() {
        None => false,
        Some((first, rest)) => {
            bytes.len() <= 64
                && (first.is_ascii_lowercase() || first.is_ascii_digit())
                && rest.iter().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-'
                })
        }
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The catalogue as it appears in messages: `` `a`, `b`, ... ``.
fn catalogue() -> String {
    REVERSE_PATTERNS
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Converts a TOML value to JSON. Datetimes become their RFC 3339 string;
/// non-finite floats have no JSON form and are an error naming the field.
fn toml_to_json(value: toml::Value, field: &str) -> Result<serde_json::Value, (String, String)> {
    use serde_json::Value as J;
    Ok(match value {
        toml::Value::String(s) => J::String(s),
        toml::Value::Integer(i) => J::from(i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => J::Number(n),
            None => {
                return Err((
                    field.to_string(),
                    format!("`{f}` cannot be represented in JSON"),
                ))
            }
        },
        toml::Value::Boolean(b) => J::Bool(b),
        toml::Value::Datetime(d) => J::String(d.to_string()),
        toml::Value::Array(items) => J::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| toml_to_json(v, &format!("{field}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(table) => J::Object(
            table
                .into_iter()
                .map(|(k, v)| {
                    let child = format!("{field}.{k}");
                    toml_to_json(v, &child).map(|j| (k, j))
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

#[cfg(test)]
mod tests;
