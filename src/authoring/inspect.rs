//! `gatehouse inspect`: a component's imports and exports, and for each
//! import what it needs, read from the one table of bindings.
//!
//! A preview 1 core module is turned into a component with the same
//! adapter the sandbox uses, so its imports are the interfaces it would
//! really be linked with; the WASI functions the module itself imports are
//! listed too.

use std::path::{Path, PathBuf};

use serde::Serialize;
use wit_parser::{Resolve, WorldItem, WorldKey};

use super::{AuthoringError, NotWasm};
use crate::sandbox::imports::interface_name;
use crate::sandbox::table::{self, Authority};

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WasmKind {
    /// A component.
    Component,
    /// A core module (WASI preview 1), adapted on load.
    CoreModule,
}

/// What an import needs, from the table of bindings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Needs {
    /// Always linked (`compute:pure`).
    Baseline,
    /// Linked only with one of these capabilities.
    Capability {
        /// The capabilities, any one of which links it.
        any_of: Vec<&'static str>,
    },
    /// No binding serves it: a component importing it is always refused.
    Unsupported,
}

impl Needs {
    /// What `import` (`package/name@version`) needs.
    pub fn of(import: &str) -> Needs {
        match table::authority(interface_name(import)) {
            Authority::Baseline => Needs::Baseline,
            Authority::Needs(caps) => Needs::Capability {
                any_of: caps.iter().map(|c| c.as_str()).collect(),
            },
            Authority::Unsupported => Needs::Unsupported,
        }
    }

    /// `baseline`, `` `network:sites` ``, `` `memory:read` or `memory:write` ``,
    /// or `not provided by gatehouse`.
    pub fn describe(&self) -> String {
        match self {
            Needs::Baseline => "baseline".to_string(),
            Needs::Capability { any_of } => any_of
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            Needs::Unsupported => "not provided by gatehouse".to_string(),
        }
    }
}

/// One imported interface (or function) and what it needs.
#[derive(Debug, Clone, Serialize)]
pub struct Import {
    /// `wasi:sockets/tcp@0.2.6`, or a function imported on its own.
    pub name: String,
    /// The functions the interface declares.
    pub functions: Vec<String>,
    /// What it needs to be linked.
    pub needs: Needs,
    /// The binding of the table that serves it, if any.
    pub binding: Option<&'static str>,
}

/// One exported interface or function.
#[derive(Debug, Clone, Serialize)]
pub struct Export {
    /// The interface's name, or a function exported on its own.
    pub name: String,
    /// The functions it exports.
    pub functions: Vec<String>,
}

/// What `gatehouse inspect` finds in a file.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// The file inspected.
    pub path: PathBuf,
    /// A component or a core module.
    pub kind: WasmKind,
    /// Whether it exports `wasi:cli/run` (a command: stdin, argv, stdout).
    pub command: bool,
    /// Every interface or function it imports.
    pub imports: Vec<Import>,
    /// Every interface or function it exports.
    pub exports: Vec<Export>,
    /// For a core module: the functions it imports, `module.name`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wasi_functions: Vec<String>,
}

impl Inspection {
    /// The imports a run could not link without a capability, or at all.
    pub fn gated(&self) -> impl Iterator<Item = &Import> {
        self.imports.iter().filter(|i| i.needs != Needs::Baseline)
    }
}

/// Reads and inspects the file at `path`.
pub fn inspect(path: &Path) -> Result<Inspection, AuthoringError> {
    let bytes = std::fs::read(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            AuthoringError::Missing {
                path: path.to_path_buf(),
            }
        } else {
            AuthoringError::Read {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    inspect_bytes(path, &bytes)
}

/// Inspects `bytes`, the contents of `path`.
pub fn inspect_bytes(path: &Path, bytes: &[u8]) -> Result<Inspection, AuthoringError> {
    let not_wasm = |reason: NotWasm| AuthoringError::NotWasm {
        path: path.to_path_buf(),
        reason,
    };
    let adapted;
    let (kind, wasi_functions, component) = if wasmparser::Parser::is_core_wasm(bytes) {
        let functions = core_imports(bytes).map_err(|e| not_wasm(NotWasm::Module(e)))?;
        adapted = crate::sandbox::p1::componentize(bytes)
            .map_err(|e| not_wasm(NotWasm::Adapter(e.into())))?;
        (WasmKind::CoreModule, functions, adapted.as_slice())
    } else if wasmparser::Parser::is_component(bytes) {
        (WasmKind::Component, Vec::new(), bytes)
    } else {
        return Err(not_wasm(NotWasm::NoHeader));
    };
    let decoded =
        wit_component::decode(component).map_err(|e| not_wasm(NotWasm::Decode(e.into())))?;
    let wit_component::DecodedWasm::Component(resolve, world) = decoded else {
        return Err(not_wasm(NotWasm::WitPackage));
    };
    let world = &resolve.worlds[world];
    let imports = world
        .imports
        .iter()
        .filter_map(|(key, item)| item_of(&resolve, key, item))
        .map(|(name, functions)| Import {
            needs: Needs::of(&name),
            binding: table::binding_of(interface_name(&name)).map(|b| b.name),
            name,
            functions,
        })
        .collect();
    let exports: Vec<Export> = world
        .exports
        .iter()
        .filter_map(|(key, item)| item_of(&resolve, key, item))
        .map(|(name, functions)| Export { name, functions })
        .collect();
    Ok(Inspection {
        path: path.to_path_buf(),
        kind,
        command: exports.iter().any(|e| e.name.starts_with("wasi:cli/run@")),
        imports,
        exports,
        wasi_functions,
    })
}

/// The name and functions of a world's import or export; `None` for a
/// type.
fn item_of(resolve: &Resolve, key: &WorldKey, item: &WorldItem) -> Option<(String, Vec<String>)> {
    match item {
        WorldItem::Interface { id, .. } => Some((
            resolve.name_world_key(key),
            resolve.interfaces[*id].functions.keys().cloned().collect(),
        )),
        WorldItem::Function(f) => Some((f.name.clone(), Vec::new())),
        _ => None,
    }
}

/// A core module's imports, `module.name`.
fn core_imports(bytes: &[u8]) -> Result<Vec<String>, wasmparser::BinaryReaderError> {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let wasmparser::Payload::ImportSection(reader) = payload? {
            for import in reader.into_imports() {
                let import = import?;
                out.push(format!("{}.{}", import.module, import.name));
            }
        }
    }
    Ok(out)
}
