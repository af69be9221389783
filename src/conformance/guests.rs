//! The suite's guests: embedded in the binary at build time (when they
//! were built, see `build.rs`), or read from a directory (`--guests DIR`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/conformance_guests.rs"));
}

/// Why the guests cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GuestsError {
    /// The `--guests` path is not a directory.
    #[error("`{0}` is not a directory")]
    NotADirectory(PathBuf),
    /// The directory holds none of the conformance guests.
    #[error("no conformance guests in `{0}`: run `bash setup.sh` in the source tree, then pass `--guests guests/target` (or rebuild gatehouse after it, which embeds them)")]
    NoneInDir(PathBuf),
    /// This binary was built without the guests embedded.
    #[error("this gatehouse was built without its conformance guests: run `bash setup.sh` in the source tree and rebuild, or pass `--guests DIR` (the source tree's `guests/target`)")]
    NotEmbedded,
}

/// The guest files by target and file name.
#[derive(Debug, Clone, Default)]
pub struct GuestSet {
    files: BTreeMap<(String, String), Vec<u8>>,
    /// Where they came from, for the report.
    pub source: String,
}

impl GuestSet {
    /// The guests embedded in this binary.
    pub fn embedded() -> Result<GuestSet, GuestsError> {
        let files: BTreeMap<(String, String), Vec<u8>> = embedded::EMBEDDED
            .iter()
            .map(|(t, f, b)| ((t.to_string(), f.to_string()), b.to_vec()))
            .collect();
        if !files.contains_key(&("wasm32-wasip2".to_string(), "cf_attack.wasm".to_string())) {
            return Err(GuestsError::NotEmbedded);
        }
        let mut files = files;
        add_generated(&mut files);
        Ok(GuestSet {
            files,
            source: "embedded".to_string(),
        })
    }

    /// The guests found under `dir`: `<dir>/<target>/release/<file>`,
    /// `<dir>/<target>/<file>`, or (the C guest) `<dir>/../c/target/<file>`.
    pub fn from_dir(dir: &Path) -> Result<GuestSet, GuestsError> {
        if !dir.is_dir() {
            return Err(GuestsError::NotADirectory(dir.to_path_buf()));
        }
        let mut files = BTreeMap::new();
        let cases = super::cases();
        let needed = cases
            .iter()
            .map(|c| (c.world.target(), c.guest))
            .chain(std::iter::once((
                "wasm32-wasip2",
                super::cases::SCAN_RESIDUE,
            )));
        for (target, guest) in needed {
            let key = (target.to_string(), guest.to_string());
            if files.contains_key(&key) {
                continue;
            }
            let candidates = [
                dir.join(target).join("release").join(guest),
                dir.join(target).join(guest),
                dir.join("../c/target").join(guest),
            ];
            if let Some(bytes) = candidates.iter().find_map(|p| std::fs::read(p).ok()) {
                files.insert(key, bytes);
            }
        }
        if files.is_empty() {
            return Err(GuestsError::NoneInDir(dir.to_path_buf()));
        }
        add_generated(&mut files);
        Ok(GuestSet {
            files,
            source: dir.display().to_string(),
        })
    }

    /// The bytes of `file` built for `target`.
    pub fn get(&self, target: &str, file: &str) -> Option<&[u8]> {
        self.files
            .get(&(target.to_string(), file.to_string()))
            .map(Vec::as_slice)
    }
}

/// The guest no Rust program can be: `table.grow` has no stable intrinsic.
pub(super) const TABLE_GROW: &str = "cf_table_grow.wasm";

/// The guests the suite makes itself: [`TABLE_GROW`], as a core module
/// (preview 1: the host componentizes it, as any preview 1 module) and
/// as a component (preview 2), wrapped with the same preview 1 adapter.
fn add_generated(files: &mut BTreeMap<(String, String), Vec<u8>>) {
    let module = table_grow_module();
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .and_then(|e| {
            e.adapter(
                "wasi_snapshot_preview1",
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
            )
        })
        .and_then(|e| e.validate(true).encode());
    if let Ok(component) = component {
        files.insert(
            ("wasm32-wasip2".to_string(), TABLE_GROW.to_string()),
            component,
        );
    }
    files.insert(
        ("wasm32-wasip1".to_string(), TABLE_GROW.to_string()),
        module,
    );
}

/// A command that imports nothing: `_start` grows a `funcref` table with
/// no maximum by 1 000 elements at a time until a growth fails
/// (`table.grow` returns -1); the host must stop it at its table cap
/// first. When it is not stopped it returns normally, with no output.
pub fn table_grow_module() -> Vec<u8> {
    use wasm_encoder::{
        AbstractHeapType, BlockType, CodeSection, ExportKind, ExportSection, Function,
        FunctionSection, HeapType, Instruction, MemorySection, MemoryType, Module, RefType,
        TableSection, TableType, TypeSection,
    };
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    module.section(&types);
    let mut functions = FunctionSection::new();
    functions.function(0);
    module.section(&functions);
    let mut tables = TableSection::new();
    tables.table(TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: 1,
        maximum: None,
        shared: false,
    });
    module.section(&tables);
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    module.section(&memories);
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("_start", ExportKind::Func, 0);
    module.section(&exports);
    let mut start = Function::new([]);
    start
        .instruction(&Instruction::Loop(BlockType::Empty))
        .instruction(&Instruction::RefNull(HeapType::Abstract {
            shared: false,
            ty: AbstractHeapType::Func,
        }))
        .instruction(&Instruction::I32Const(1_000))
        .instruction(&Instruction::TableGrow(0))
        .instruction(&Instruction::I32Const(-1))
        .instruction(&Instruction::I32Ne)
        .instruction(&Instruction::BrIf(0))
        .instruction(&Instruction::End)
        .instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&start);
    module.section(&code);
    module.finish()
}
