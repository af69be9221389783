//! Core WASI preview-1 modules become components with the preview-1
//! adapter, so they run through the same sandbox as every component (the
//! same filesystem layer, globs and protected paths: the adapter turns each
//! `fd_*` / `path_*` call into a `wasi:filesystem` call on our bindings).
//!
//! Not `wasmtime_wasi::p1` (the host's own preview 1, which `wasmtime run`
//! uses for a core module): it calls wasmtime-wasi's filesystem directly,
//! past the journaling layer ([`crate::sandbox::journal_fs`]) that holds
//! every open and mutation to the globs and protected paths and journals
//! it for undo; and the run path (instance pools, the `wasi:cli/run`
//! export, the linked units) is the component's.
//!
//! The adapter has no memory of its own: it takes its stack and state from
//! the program's memory, which a runtime such as AssemblyScript's treats as
//! all its own (it traps in `args_get`/`environ_get` once its heap has
//! overwritten the adapter's state). So the module is first moved up in its
//! memory, out of the adapter's way ([`shift`]); a module that cannot be
//! moved is componentized as it is, as before.
//!
//! One thing the adapter cannot carry: `proc_exit(N)` becomes
//! `wasi:cli/exit.exit(err)`, status 1, for every N other than 0. So before
//! componentizing, the module's `proc_exit` import is re-pointed at
//! `wasi:cli/exit@0.2.12`'s `exit-with-code` (same core signature, `(i32)`),
//! and the module says so in its component metadata; `wasmtime run` gives a
//! preview-1 program its status the same way (N modulo 256 on Unix).

mod shift;

use anyhow::Context as _;
use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER;
use wasm_encoder::{ImportSection, Module, RawSection};
use wasmparser::{Parser, Payload, TypeRef};

const P1: &str = "wasi_snapshot_preview1";

/// Which adaptation [`componentize`] makes, in the name of the compiled
/// component's cache entry: changed whenever the component it makes of a
/// module changes (2: the module moved out of the adapter's way; 3: an
/// empty read or write asks whether its descriptor exists).
pub const ADAPTATION: &str = "-p1v3";
const EXIT_INTERFACE: &str = "wasi:cli/exit@0.2.12";

/// The interface `exit-with-code` comes from, exactly as the adapter's own
/// metadata has it (both functions), so the two merge into one import.
const EXIT_WIT: &str = r#"
package wasi:cli@0.2.12;

@since(version = 0.2.0)
interface exit {
  @since(version = 0.2.0)
  exit: func(status: result);

  @since(version = 0.2.12)
  exit-with-code: func(status-code: u8);
}

world gatehouse-p1-exit {
  import exit;
}
"#;

/// Wraps a preview-1 command module into a `wasi:cli/command` component.
pub fn componentize(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    let module = match shift::shift(module, (EXIT_INTERFACE, "exit-with-code"))? {
        shift::Shifted::Done(mut shifted, redirected) => {
            if redirected {
                embed_exit_metadata(&mut shifted)?;
            }
            shifted
        }
        // Left where it was (see `shift`): only `proc_exit` re-pointed.
        shift::Shifted::NotApplicable(why) => {
            tracing::debug!("preview-1 module adapted where it is: {why}");
            match redirect_proc_exit(module)? {
                Some(rewritten) => rewritten,
                None => module.to_vec(),
            }
        }
    };
    wit_component::ComponentEncoder::default()
        .module(&module)?
        .adapter(P1, WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER)?
        .validate(true)
        .encode()
}

/// The module with its `wasi_snapshot_preview1.proc_exit` import replaced
/// by `wasi:cli/exit@0.2.12.exit-with-code` and the metadata that declares
/// it; `None` when the module does not import `proc_exit`. Every other
/// section is copied byte for byte (only imports are renamed, so no index
/// in the module changes).
fn redirect_proc_exit(module: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
    let mut out = Module::new();
    let mut redirected = false;
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.context("reading the preview-1 module")?;
        match payload {
            Payload::ImportSection(reader) => {
                let mut imports = ImportSection::new();
                for import in reader.into_imports() {
                    let import = import.context("reading the module's imports")?;
                    let ty = match import.ty {
                        TypeRef::Func(index) => wasm_encoder::EntityType::Function(index),
                        // Only functions are renamed: any other import is
                        // copied as the section was, untouched.
                        _ => return Ok(None),
                    };
                    if import.module == P1 && import.name == "proc_exit" {
                        imports.import(EXIT_INTERFACE, "exit-with-code", ty);
                        redirected = true;
                    } else {
                        imports.import(import.module, import.name, ty);
                    }
                }
                out.section(&imports);
            }
            Payload::Version { .. } | Payload::End(_) => {}
            other => {
                if let Some((id, range)) = other.as_section() {
                    out.section(&RawSection {
                        id,
                        data: &module[range],
                    });
                }
            }
        }
    }
    if !redirected {
        return Ok(None);
    }
    let mut bytes = out.finish();
    embed_exit_metadata(&mut bytes)?;
    Ok(Some(bytes))
}

/// Declares `exit-with-code`'s interface in the module's component
/// metadata (it imports it in place of `proc_exit`).
fn embed_exit_metadata(bytes: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve.push_str("gatehouse-p1-exit.wit", EXIT_WIT)?;
    let world = resolve.select_world(&[package], Some("gatehouse-p1-exit"))?;
    wit_component::embed_component_metadata(
        bytes,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )?;
    Ok(())
}
