//! The preview-1 module, moved up by [`RESERVED_PAGES`] pages of its own
//! memory, so that the adapter's stack and state live in pages the program
//! can never reach.
//!
//! Why: the adapter has no memory of its own; it takes two pages (its
//! shadow stack and its `State`) from the program's memory, through the
//! program's `cabi_realloc` or, when the program exports none, with
//! `memory.grow`. A runtime that owns its memory the way AssemblyScript's
//! does (its allocator takes everything from its heap base up to
//! `memory.size()` at its first allocation and writes its bookkeeping at
//! the end) then takes the adapter's pages for its own heap: the first
//! `args_get` or `environ_get` after that finds the adapter's state
//! overwritten and traps (`assertion failed at adapter line …`).
//! `wasmtime run` never shares a core module's memory with anything: its
//! preview-1 implementation is in the host.
//!
//! The rewrite (the approach of Fastly's Viceroy, done here on the program
//! instead of the adapter):
//! - every load and store of the program adds `D` (= the reserved pages) to
//!   its static offset; its active data segments move up by `D`;
//!   `memory.size` answers `D` pages less, `memory.grow` likewise, and
//!   `memory.fill`/`copy`/`init` add `D` to their addresses (through small
//!   helpers); the memory's limits grow by the reserved pages. The program
//!   sees the memory it declared, and nothing below its address 0;
//! - the program exports a `cabi_realloc` (replacing its own, if it had
//!   one: it would answer addresses of the program's view) that hands out
//!   the reserved pages: the adapter allocates its stack and state there,
//!   lazily, at its first call;
//! - every preview-1 import that takes pointers is called through a
//!   wrapper that adds `D` to them (and to the buffers of an iovec array,
//!   copied into the reserved scratch page; and subtracts it from the
//!   pointers `args_get`/`environ_get` write back);
//! - a read or write whose iovecs are all empty first asks `fd_fdstat_get`
//!   (appended to the imports when the module has none, its own functions
//!   moved up by one) whether its descriptor exists: the adapter answers
//!   an empty one with success before looking, where `wasmtime run` says
//!   `EBADF` for a descriptor the program never had.
//!
//! A module this does not apply to (an imported or shared or 64-bit
//! memory, more than one, an import other than preview 1's, a data
//! segment at a computed offset…) is left as it is: [`shift`] says why.

use std::collections::BTreeSet;

use wasm_encoder::reencode::{utils, Reencode};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, DataSection, EntityType, ExportSection, Function,
    FunctionSection, GlobalSection, GlobalType, ImportSection, Instruction, MemArg, MemorySection,
    MemoryType, Module, StartSection, TypeSection, ValType,
};
use wasmparser::{Operator, Parser, Payload, TypeRef};

/// The pages below the program's memory: the scratch page (0) and the
/// adapter's arena (the rest).
pub const RESERVED_PAGES: u32 = 4;
const PAGE: u32 = 65536;
/// The distance between an address of the program and the real one.
const D: u32 = RESERVED_PAGES * PAGE;
/// Where a wrapper asks `args_sizes_get`/`environ_sizes_get` for a count.
const SCRATCH_SIZES: i32 = 16;
/// Where a wrapper of an empty read or write asks `fd_fdstat_get` about
/// its descriptor (a 24-byte `fdstat`, 8-aligned).
const SCRATCH_FDSTAT: i32 = 64;
/// Where a wrapper copies an iovec array, its buffers moved.
const SCRATCH_IOVS: i32 = 1024;
/// The most iovecs passed on in one call (wasi-libc's `IOV_MAX`): a longer
/// array is a short read or write, as preview 1 allows.
const MAX_IOVS: i32 = 1024;
/// The adapter's arena: everything reserved above the scratch page.
const ARENA_START: i32 = PAGE as i32;
const ARENA_END: u32 = D;

const P1: &str = super::P1;

/// What [`shift`] made of a module.
pub enum Shifted {
    /// The rewritten module; whether its `proc_exit` import was redirected.
    Done(Vec<u8>, bool),
    /// Left as it is, and why.
    NotApplicable(String),
}

/// How a preview-1 function takes pointers (parameter positions).
enum Shape {
    /// These parameters are pointers into the program's memory.
    Plain(&'static [u32]),
    /// `iovs` points at an array of `(buf, len)` whose length is the next
    /// parameter; `ptrs` are plain pointers.
    Iovecs { iovs: u32, ptrs: &'static [u32] },
    /// `args_get`/`environ_get`: both parameters are pointers, and the
    /// pointers written into the first must be moved back; `sizes` is the
    /// function that counts them.
    Strings { sizes: &'static str },
}

/// The shape of every preview-1 function (`wasi_snapshot_preview1.witx`).
fn shape(name: &str) -> Option<Shape> {
    use Shape::*;
    Some(match name {
        "args_get" => Strings {
            sizes: "args_sizes_get",
        },
        "environ_get" => Strings {
            sizes: "environ_sizes_get",
        },
        "args_sizes_get" | "environ_sizes_get" => Plain(&[0, 1]),
        "clock_res_get"
        | "fd_fdstat_get"
        | "fd_filestat_get"
        | "fd_prestat_get"
        | "fd_prestat_dir_name"
        | "fd_tell"
        | "path_create_directory"
        | "path_remove_directory"
        | "path_unlink_file" => Plain(&[1]),
        "clock_time_get" | "path_filestat_set_times" | "sock_accept" => Plain(&[2]),
        "fd_seek" => Plain(&[3]),
        "fd_readdir" => Plain(&[1, 4]),
        "path_filestat_get" => Plain(&[2, 4]),
        "path_link" => Plain(&[2, 5]),
        "path_open" => Plain(&[2, 8]),
        "path_readlink" => Plain(&[1, 3, 5]),
        "path_rename" => Plain(&[1, 4]),
        "path_symlink" => Plain(&[0, 3]),
        "poll_oneoff" => Plain(&[0, 1, 3]),
        "random_get" => Plain(&[0]),
        "fd_read" | "fd_write" => Iovecs {
            iovs: 1,
            ptrs: &[3],
        },
        "fd_pread" | "fd_pwrite" | "sock_send" => Iovecs {
            iovs: 1,
            ptrs: &[4],
        },
        "sock_recv" => Iovecs {
            iovs: 1,
            ptrs: &[4, 5],
        },
        "fd_advise"
        | "fd_allocate"
        | "fd_close"
        | "fd_datasync"
        | "fd_fdstat_set_flags"
        | "fd_fdstat_set_rights"
        | "fd_filestat_set_size"
        | "fd_filestat_set_times"
        | "fd_renumber"
        | "fd_sync"
        | "proc_exit"
        | "proc_raise"
        | "sched_yield"
        | "sock_shutdown" => Plain(&[]),
        _ => return None,
    })
}

/// One function import of the module.
struct Import {
    module: String,
    name: String,
    ty: u32,
}

/// What a first pass over the module found.
struct Survey {
    imports: Vec<Import>,
    /// The parameter types of each function type (`None`: not a function).
    func_types: Vec<Option<Vec<wasmparser::ValType>>>,
    defined: u32,
    /// Data segments `memory.init` names.
    inits: BTreeSet<u32>,
}

fn survey(module: &[u8]) -> Result<Survey, String> {
    let mut s = Survey {
        imports: Vec::new(),
        func_types: Vec::new(),
        defined: 0,
        inits: BTreeSet::new(),
    };
    let mut memories = 0;
    for payload in Parser::new(0).parse_all(module) {
        match payload.map_err(|e| e.to_string())? {
            Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    let ty = ty.map_err(|e| e.to_string())?;
                    s.func_types.push(Some(ty.params().to_vec()));
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.map_err(|e| e.to_string())?;
                    match import.ty {
                        TypeRef::Func(ty) => s.imports.push(Import {
                            module: import.module.to_string(),
                            name: import.name.to_string(),
                            ty,
                        }),
                        _ => return Err(format!("it imports `{}` (not a function)", import.name)),
                    }
                }
            }
            Payload::FunctionSection(reader) => s.defined = reader.count(),
            Payload::MemorySection(reader) => {
                for memory in reader {
                    let memory = memory.map_err(|e| e.to_string())?;
                    if memory.memory64 || memory.shared || memory.page_size_log2.is_some() {
                        return Err("its memory is 64-bit, shared or of custom pages".into());
                    }
                    memories += 1;
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut reader = body.get_operators_reader().map_err(|e| e.to_string())?;
                while !reader.eof() {
                    match reader.read().map_err(|e| e.to_string())? {
                        Operator::MemoryInit { data_index, .. } => {
                            s.inits.insert(data_index);
                        }
                        Operator::MemoryDiscard { .. } => {
                            return Err("it uses `memory.discard`".into());
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if memories != 1 {
        return Err(format!("it defines {memories} memories, not one"));
    }
    Ok(s)
}

/// The function indices of what the rewrite adds, after the module's own.
struct Added {
    tr: u32,
    size: u32,
    grow: u32,
    fill: u32,
    copy: u32,
    /// `(data index, helper)` for each segment `memory.init` names.
    inits: Vec<(u32, u32)>,
    realloc: u32,
    /// `(import index, wrapper)` for each preview-1 import with pointers.
    wrappers: Vec<(u32, u32)>,
    /// The module's import count before the rewrite, and how many imports
    /// it appends (0 or 1: `fd_fdstat_get`): the module's own functions
    /// move up by that many.
    imported: u32,
    extra: u32,
}

impl Added {
    /// Where the module's function `func` is after the rewrite: its
    /// imports stay, its own functions move past the appended import.
    fn moved(&self, func: u32) -> u32 {
        if func < self.imported {
            func
        } else {
            func + self.extra
        }
    }
}

/// The types the helpers use, appended to the type section.
struct Types {
    i32_to_i32: u32,
    to_i32: u32,
    three_i32: u32,
    realloc: u32,
    /// `fd_fdstat_get`'s, `(i32, i32) -> i32`, for the appended import.
    two_i32_to_i32: u32,
}

struct Shift {
    added: Added,
}

impl Reencode for Shift {
    type Error = String;

    /// A call to a preview-1 import with pointers calls its wrapper; the
    /// module's own functions move past an appended import.
    fn function_index(&mut self, func: u32) -> Result<u32, wasm_encoder::reencode::Error<String>> {
        Ok(self
            .added
            .wrappers
            .iter()
            .find(|(import, _)| *import == func)
            .map_or(self.added.moved(func), |(_, wrapper)| *wrapper))
    }

    fn mem_arg(
        &mut self,
        arg: wasmparser::MemArg,
    ) -> Result<MemArg, wasm_encoder::reencode::Error<String>> {
        if arg.memory != 0 {
            return Err(user("an access to a second memory"));
        }
        let offset = arg
            .offset
            .checked_add(u64::from(D))
            .filter(|o| *o <= u64::from(u32::MAX))
            .ok_or_else(|| user("an access whose offset cannot move"))?;
        Ok(MemArg {
            offset,
            align: arg.align.into(),
            memory_index: 0,
        })
    }

    fn instruction<'a>(
        &mut self,
        arg: Operator<'a>,
    ) -> Result<Instruction<'a>, wasm_encoder::reencode::Error<String>> {
        let a = &self.added;
        Ok(match arg {
            Operator::MemorySize { mem: 0 } => Instruction::Call(a.size),
            Operator::MemoryGrow { mem: 0 } => Instruction::Call(a.grow),
            Operator::MemoryFill { mem: 0 } => Instruction::Call(a.fill),
            Operator::MemoryCopy {
                dst_mem: 0,
                src_mem: 0,
            } => Instruction::Call(a.copy),
            Operator::MemoryInit { data_index, mem: 0 } => {
                let helper = a
                    .inits
                    .iter()
                    .find(|(d, _)| *d == data_index)
                    .map(|(_, f)| *f)
                    .ok_or_else(|| user("a `memory.init` not surveyed"))?;
                Instruction::Call(helper)
            }
            Operator::MemorySize { .. }
            | Operator::MemoryGrow { .. }
            | Operator::MemoryFill { .. }
            | Operator::MemoryCopy { .. }
            | Operator::MemoryInit { .. }
            | Operator::MemoryDiscard { .. } => {
                return Err(user("an instruction on a second memory"))
            }
            other => utils::instruction(self, other)?,
        })
    }
}

/// The name section's indices: a function keeps its name where it moved
/// (not its wrapper's, as a call would).
struct NameShift<'a>(&'a Added);

impl Reencode for NameShift<'_> {
    type Error = String;

    fn function_index(&mut self, func: u32) -> Result<u32, wasm_encoder::reencode::Error<String>> {
        Ok(self.0.moved(func))
    }
}

fn user(why: &str) -> wasm_encoder::reencode::Error<String> {
    wasm_encoder::reencode::Error::UserError(why.to_string())
}

/// The rewritten module (see the module's documentation), with its
/// `proc_exit` import re-pointed at `exit_import` when it has one.
pub fn shift(module: &[u8], exit_import: (&str, &str)) -> anyhow::Result<Shifted> {
    let survey = match survey(module) {
        Ok(s) => s,
        Err(why) => return Ok(Shifted::NotApplicable(why)),
    };
    match rewrite(module, &survey, exit_import) {
        Ok(done) => Ok(done),
        Err(wasm_encoder::reencode::Error::UserError(why)) => Ok(Shifted::NotApplicable(why)),
        Err(e) => Err(anyhow::anyhow!("rewriting the preview-1 module: {e}")),
    }
}

type Rewritten<T> = std::result::Result<T, wasm_encoder::reencode::Error<String>>;

fn rewrite(module: &[u8], survey: &Survey, exit_import: (&str, &str)) -> Rewritten<Shifted> {
    let imported = u32::try_from(survey.imports.len()).map_err(|_| user("too many imports"))?;
    let import_index = |name: &str| {
        survey
            .imports
            .iter()
            .position(|i| i.module == P1 && i.name == name)
            .and_then(|i| u32::try_from(i).ok())
    };
    // Every import is preview 1's, of a function the adapter has, with
    // i32 pointers where its shape says.
    let mut wrapped = Vec::new();
    for (index, import) in (0u32..).zip(&survey.imports) {
        if import.module != P1 {
            return Err(user(&format!("it imports from `{}`", import.module)));
        }
        let shape = shape(&import.name)
            .ok_or_else(|| user(&format!("`{}` is not a preview-1 function", import.name)))?;
        let params = survey
            .func_types
            .get(import.ty as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| user("an import of an unknown type"))?;
        let pointers: Vec<u32> = match &shape {
            Shape::Plain(p) => p.to_vec(),
            Shape::Iovecs { iovs, ptrs } => std::iter::once(*iovs)
                .chain(std::iter::once(iovs + 1))
                .chain(ptrs.iter().copied())
                .collect(),
            Shape::Strings { sizes } => {
                if import_index(sizes).is_none() {
                    return Err(user(&format!(
                        "it imports `{}` without `{sizes}`",
                        import.name
                    )));
                }
                vec![0, 1]
            }
        };
        if pointers
            .iter()
            .any(|p| params.get(*p as usize) != Some(&wasmparser::ValType::I32))
        {
            return Err(user(&format!("`{}` has an unexpected type", import.name)));
        }
        if !pointers.is_empty() {
            wrapped.push((index, import.ty, shape));
        }
    }

    // An empty read or write (no iovec, or only empty ones) is answered
    // by the adapter with success before it looks at the descriptor: its
    // wrapper asks `fd_fdstat_get` first, so a descriptor the program
    // never had is `EBADF` as under `wasmtime run`. The module's own
    // import when it has one; otherwise one is appended.
    let needs_check = wrapped
        .iter()
        .any(|(_, _, shape)| matches!(shape, Shape::Iovecs { .. }));
    let own_fdstat = import_index("fd_fdstat_get");
    if let Some(i) = own_fdstat {
        let fits = survey
            .imports
            .get(i as usize)
            .and_then(|import| survey.func_types.get(import.ty as usize))
            .and_then(Option::as_ref)
            .is_some_and(|p| p.as_slice() == [wasmparser::ValType::I32; 2]);
        if !fits {
            return Err(user("`fd_fdstat_get` has an unexpected type"));
        }
    }
    for (import, _, shape) in &wrapped {
        let fd_is_i32 = survey
            .imports
            .get(*import as usize)
            .and_then(|i| survey.func_types.get(i.ty as usize))
            .and_then(Option::as_ref)
            .is_some_and(|p| p.first() == Some(&wasmparser::ValType::I32));
        if matches!(shape, Shape::Iovecs { .. }) && !fd_is_i32 {
            return Err(user("an iovec function whose descriptor is not an i32"));
        }
    }
    let extra = u32::from(needs_check && own_fdstat.is_none());
    let fdstat = match (needs_check, own_fdstat) {
        (false, _) => None,
        (true, Some(i)) => Some(i),
        (true, None) => Some(imported),
    };

    // The function indices of what is added.
    let mut next = imported + extra + survey.defined;
    let mut take = || {
        let f = next;
        next += 1;
        f
    };
    let (tr, size, grow, fill, copy) = (take(), take(), take(), take(), take());
    let inits: Vec<(u32, u32)> = survey.inits.iter().map(|d| (*d, take())).collect();
    let realloc = take();
    let wrappers: Vec<(u32, u32)> = wrapped.iter().map(|(i, _, _)| (*i, take())).collect();
    let mut shift = Shift {
        added: Added {
            tr,
            size,
            grow,
            fill,
            copy,
            inits,
            realloc,
            wrappers,
            imported,
            extra,
        },
    };

    let mut out = Module::new();
    let mut types_added = None;
    let mut globals_done = false;
    let mut redirected = false;
    let mut code: Option<(CodeSection, u32)> = None;
    let mut bump = 0;
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload?;
        // The global section (the arena's bump pointer) goes before any
        // of these, made when the module has none.
        if matches!(
            payload,
            Payload::ExportSection(_)
                | Payload::StartSection { .. }
                | Payload::ElementSection(_)
                | Payload::DataCountSection { .. }
                | Payload::CodeSectionStart { .. }
                | Payload::DataSection(_)
        ) && !globals_done
        {
            let mut globals = GlobalSection::new();
            bump = 0;
            arena_global(&mut globals);
            out.section(&globals);
            globals_done = true;
        }
        match payload {
            Payload::Version { .. } | Payload::End(_) => {}
            Payload::TypeSection(reader) => {
                let mut types = TypeSection::new();
                shift.parse_type_section(&mut types, reader)?;
                let base = types.len();
                types.ty().function([ValType::I32], [ValType::I32]);
                types.ty().function([], [ValType::I32]);
                types
                    .ty()
                    .function([ValType::I32, ValType::I32, ValType::I32], []);
                types.ty().function([ValType::I32; 4], [ValType::I32]);
                types.ty().function([ValType::I32; 2], [ValType::I32]);
                types_added = Some(Types {
                    i32_to_i32: base,
                    to_i32: base + 1,
                    three_i32: base + 2,
                    realloc: base + 3,
                    two_i32_to_i32: base + 4,
                });
                out.section(&types);
            }
            Payload::ImportSection(reader) => {
                let mut imports = ImportSection::new();
                for import in reader.into_imports() {
                    let import = import?;
                    let TypeRef::Func(ty) = import.ty else {
                        return Err(user("a non-function import"));
                    };
                    if import.module == P1 && import.name == "proc_exit" {
                        imports.import(exit_import.0, exit_import.1, EntityType::Function(ty));
                        redirected = true;
                    } else {
                        imports.import(import.module, import.name, EntityType::Function(ty));
                    }
                }
                if extra > 0 {
                    let types = types_added
                        .as_ref()
                        .ok_or_else(|| user("no type section"))?;
                    imports.import(
                        P1,
                        "fd_fdstat_get",
                        EntityType::Function(types.two_i32_to_i32),
                    );
                }
                out.section(&imports);
            }
            Payload::FunctionSection(reader) => {
                let types = types_added
                    .as_ref()
                    .ok_or_else(|| user("no type section"))?;
                let mut functions = FunctionSection::new();
                shift.parse_function_section(&mut functions, reader)?;
                for ty in [
                    types.i32_to_i32,
                    types.to_i32,
                    types.i32_to_i32,
                    types.three_i32,
                    types.three_i32,
                ] {
                    functions.function(ty);
                }
                for _ in &shift.added.inits {
                    functions.function(types.three_i32);
                }
                functions.function(types.realloc);
                for (_, ty, _) in &wrapped {
                    functions.function(*ty);
                }
                out.section(&functions);
            }
            Payload::MemorySection(reader) => {
                let mut memories = MemorySection::new();
                for memory in reader {
                    let memory = memory?;
                    let reserved = u64::from(RESERVED_PAGES);
                    let minimum = memory.initial + reserved;
                    if minimum > 65536 {
                        return Err(user("its memory is too large to move"));
                    }
                    memories.memory(MemoryType {
                        minimum,
                        maximum: memory.maximum.map(|m| (m + reserved).min(65536)),
                        memory64: false,
                        shared: false,
                        page_size_log2: None,
                    });
                }
                out.section(&memories);
            }
            Payload::GlobalSection(reader) => {
                let mut globals = GlobalSection::new();
                shift.parse_global_section(&mut globals, reader)?;
                bump = globals.len();
                arena_global(&mut globals);
                out.section(&globals);
                globals_done = true;
            }
            Payload::ExportSection(reader) => {
                let mut exports = ExportSection::new();
                for export in reader {
                    let export = export?;
                    // The program's own allocator answers addresses of its
                    // view: the adapter gets the arena instead.
                    if export.name == "cabi_realloc" || export.name == "cabi_realloc_adapter" {
                        continue;
                    }
                    let kind = shift.export_kind(export.kind)?;
                    let index = shift.external_index(export.kind, export.index)?;
                    exports.export(export.name, kind, index);
                }
                exports.export(
                    "cabi_realloc",
                    wasm_encoder::ExportKind::Func,
                    shift.added.realloc,
                );
                out.section(&exports);
            }
            Payload::StartSection { func, .. } => {
                out.section(&StartSection {
                    function_index: shift.function_index(func)?,
                });
            }
            Payload::ElementSection(reader) => {
                let mut elements = wasm_encoder::ElementSection::new();
                shift.parse_element_section(&mut elements, reader)?;
                out.section(&elements);
            }
            Payload::DataCountSection { count, .. } => {
                out.section(&wasm_encoder::DataCountSection { count });
            }
            Payload::CodeSectionStart { count: 0, .. } => return Err(user("no code")),
            Payload::CodeSectionStart { count, .. } => {
                code = Some((CodeSection::new(), count));
            }
            Payload::CodeSectionEntry(body) => {
                let (section, left) = code.as_mut().ok_or_else(|| user("a stray body"))?;
                shift.parse_function_body(section, body)?;
                *left -= 1;
                if *left == 0 {
                    let mut section = std::mem::take(section);
                    helpers(&mut section, &shift.added, bump);
                    for (import, _, shape) in &wrapped {
                        let params = survey
                            .imports
                            .get(*import as usize)
                            .and_then(|i| survey.func_types.get(i.ty as usize))
                            .and_then(Option::as_ref)
                            .ok_or_else(|| user("an import of an unknown type"))?;
                        let sizes = match shape {
                            Shape::Strings { sizes } => import_index(sizes),
                            _ => None,
                        };
                        section.function(&wrapper(
                            *import,
                            params.len(),
                            shape,
                            sizes,
                            shift.added.tr,
                            fdstat,
                        ));
                    }
                    out.section(&section);
                    code = None;
                }
            }
            Payload::DataSection(reader) => {
                let mut data = DataSection::new();
                for datum in reader {
                    let datum = datum?;
                    match datum.kind {
                        wasmparser::DataKind::Passive => {
                            data.passive(datum.data.iter().copied());
                        }
                        wasmparser::DataKind::Active {
                            memory_index: 0,
                            offset_expr,
                        } => {
                            let mut ops = offset_expr.get_operators_reader();
                            let offset = match (ops.read()?, ops.read()?) {
                                (Operator::I32Const { value }, Operator::End) => value as u32,
                                _ => return Err(user("a data segment at a computed offset")),
                            };
                            let moved = offset
                                .checked_add(D)
                                .ok_or_else(|| user("a data segment that cannot move"))?;
                            data.active(
                                0,
                                &ConstExpr::i32_const(moved as i32),
                                datum.data.iter().copied(),
                            );
                        }
                        wasmparser::DataKind::Active { .. } => {
                            return Err(user("a data segment in a second memory"))
                        }
                    }
                }
                out.section(&data);
            }
            Payload::CustomSection(reader) => {
                // DWARF describes the code as it was: dropped. Names
                // follow the functions an appended import moved; the rest
                // (producers, component types) is unchanged by the
                // rewrite: it names no function.
                if let wasmparser::KnownCustom::Name(names) = reader.as_known() {
                    let names = utils::custom_name_section(&mut NameShift(&shift.added), names)?;
                    out.section(&names);
                } else if !reader.name().starts_with(".debug_") {
                    out.section(&wasm_encoder::CustomSection {
                        name: reader.name().into(),
                        data: reader.data().into(),
                    });
                }
            }
            Payload::TableSection(reader) => {
                let mut tables = wasm_encoder::TableSection::new();
                shift.parse_table_section(&mut tables, reader)?;
                out.section(&tables);
            }
            Payload::TagSection(reader) => {
                let mut tags = wasm_encoder::TagSection::new();
                shift.parse_tag_section(&mut tags, reader)?;
                out.section(&tags);
            }
            _ => return Err(user("a section a command module does not have")),
        }
    }
    if code.is_some() || !globals_done {
        return Err(user("no code"));
    }
    Ok(Shifted::Done(out.finish(), redirected))
}

/// The bump pointer of the adapter's arena.
fn arena_global(globals: &mut GlobalSection) {
    globals.global(
        GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        },
        &ConstExpr::i32_const(ARENA_START),
    );
}

fn mem(offset: u64) -> MemArg {
    MemArg {
        offset,
        align: 2,
        memory_index: 0,
    }
}

/// The bodies of the helpers, in the order of [`Added`].
fn helpers(code: &mut CodeSection, a: &Added, bump: u32) {
    let p = RESERVED_PAGES as i32;
    // tr(v): v + D, trapping where that would wrap (an address no memory
    // of the program can hold).
    let mut f = Function::new([]);
    f.instructions()
        .local_get(0)
        .i32_const((u32::MAX - D) as i32)
        .i32_gt_u()
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        .local_get(0)
        .i32_const(D as i32)
        .i32_add()
        .end();
    code.function(&f);
    // memory.size
    let mut f = Function::new([]);
    f.instructions().memory_size(0).i32_const(p).i32_sub().end();
    code.function(&f);
    // memory.grow
    let mut f = Function::new([(1, ValType::I32)]);
    f.instructions()
        .local_get(0)
        .memory_grow(0)
        .local_tee(1)
        .i32_const(-1)
        .i32_eq()
        .if_(BlockType::Result(ValType::I32))
        .i32_const(-1)
        .else_()
        .local_get(1)
        .i32_const(p)
        .i32_sub()
        .end()
        .end();
    code.function(&f);
    // memory.fill
    let mut f = Function::new([]);
    f.instructions()
        .local_get(0)
        .call(a.tr)
        .local_get(1)
        .local_get(2)
        .memory_fill(0)
        .end();
    code.function(&f);
    // memory.copy
    let mut f = Function::new([]);
    f.instructions()
        .local_get(0)
        .call(a.tr)
        .local_get(1)
        .call(a.tr)
        .local_get(2)
        .memory_copy(0, 0)
        .end();
    code.function(&f);
    // memory.init, one per segment
    for (data, _) in &a.inits {
        let mut f = Function::new([]);
        f.instructions()
            .local_get(0)
            .call(a.tr)
            .local_get(1)
            .local_get(2)
            .memory_init(0, *data)
            .end();
        code.function(&f);
    }
    // cabi_realloc(old, old_len, align, new_len): a bump allocator over
    // the arena, for new allocations only (the adapter asks for its stack
    // and its state, once each).
    let mut f = Function::new([(2, ValType::I32)]);
    f.instructions()
        .local_get(0)
        .local_get(1)
        .i32_or()
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        // p = (bump + align - 1) & -align
        .global_get(bump)
        .local_get(2)
        .i32_add()
        .i32_const(1)
        .i32_sub()
        .i32_const(0)
        .local_get(2)
        .i32_sub()
        .i32_and()
        .local_tee(4)
        // end = p + new_len, within the arena
        .local_get(3)
        .i32_add()
        .local_tee(5)
        .i32_const(ARENA_END as i32)
        .i32_gt_u()
        .local_get(5)
        .local_get(4)
        .i32_lt_u()
        .i32_or()
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        .local_get(5)
        .global_set(bump)
        .local_get(4)
        .end();
    code.function(&f);
}

/// The wrapper of preview-1 import `import` (`params` parameters): its
/// pointers moved by `D` on the way in (and back, for what `args_get` and
/// `environ_get` write); an iovec function whose iovecs are all empty asks
/// `fdstat` (`fd_fdstat_get`) about its descriptor first and returns its
/// errno when it has one.
fn wrapper(
    import: u32,
    params: usize,
    shape: &Shape,
    sizes: Option<u32>,
    tr: u32,
    fdstat: Option<u32>,
) -> Function {
    let params = params as u32;
    match shape {
        Shape::Plain(pointers) => {
            let mut f = Function::new([]);
            let mut sink = f.instructions();
            for p in 0..params {
                sink.local_get(p);
                if pointers.contains(&p) {
                    sink.call(tr);
                }
            }
            sink.call(import).end();
            f
        }
        Shape::Iovecs { iovs, ptrs } => {
            // `bytes`: the iovecs' lengths or-ed (0: all empty); `len`:
            // the one being copied, then the errno of `fdstat`.
            let (n, i, src, bytes, len) = (params, params + 1, params + 2, params + 3, params + 4);
            let mut f = Function::new([(5, ValType::I32)]);
            let mut sink = f.instructions();
            // n = min(len, MAX_IOVS); src = tr(iovs)
            sink.local_get(iovs + 1)
                .i32_const(MAX_IOVS)
                .local_get(iovs + 1)
                .i32_const(MAX_IOVS)
                .i32_lt_u()
                .select()
                .local_set(n)
                .local_get(*iovs)
                .call(tr)
                .local_set(src)
                .block(BlockType::Empty)
                .loop_(BlockType::Empty)
                .local_get(i)
                .local_get(n)
                .i32_ge_u()
                .br_if(1)
                // scratch[i].buf = tr(src[i].buf)
                .local_get(i)
                .i32_const(3)
                .i32_shl()
                .local_get(src)
                .local_get(i)
                .i32_const(3)
                .i32_shl()
                .i32_add()
                .i32_load(mem(0))
                .call(tr)
                .i32_store(mem(SCRATCH_IOVS as u64))
                // scratch[i].len = src[i].len
                .local_get(i)
                .i32_const(3)
                .i32_shl()
                .local_get(src)
                .local_get(i)
                .i32_const(3)
                .i32_shl()
                .i32_add()
                .i32_load(mem(4))
                .local_tee(len)
                .i32_store(mem(SCRATCH_IOVS as u64 + 4))
                .local_get(bytes)
                .local_get(len)
                .i32_or()
                .local_set(bytes)
                .local_get(i)
                .i32_const(1)
                .i32_add()
                .local_set(i)
                .br(0)
                .end()
                .end();
            if let Some(fdstat) = fdstat {
                // Nothing to move: the adapter would answer success
                // whatever the descriptor. Is it one?
                sink.local_get(bytes)
                    .i32_eqz()
                    .if_(BlockType::Empty)
                    .local_get(0)
                    .i32_const(SCRATCH_FDSTAT)
                    .call(fdstat)
                    .local_tee(len)
                    .if_(BlockType::Empty)
                    .local_get(len)
                    .return_()
                    .end()
                    .end();
            }
            for p in 0..params {
                if p == *iovs {
                    sink.i32_const(SCRATCH_IOVS);
                } else if p == iovs + 1 {
                    sink.local_get(n);
                } else {
                    sink.local_get(p);
                    if ptrs.contains(&p) {
                        sink.call(tr);
                    }
                }
            }
            sink.call(import).end();
            f
        }
        Shape::Strings { .. } => {
            let (errno, count, i, base) = (2, 3, 4, 5);
            let mut f = Function::new([(4, ValType::I32)]);
            let mut sink = f.instructions();
            sink.local_get(0)
                .call(tr)
                .local_set(base)
                .local_get(base)
                .local_get(1)
                .call(tr)
                .call(import)
                .local_tee(errno)
                .if_(BlockType::Empty)
                .local_get(errno)
                .return_()
                .end();
            if let Some(sizes) = sizes {
                sink.i32_const(SCRATCH_SIZES)
                    .i32_const(SCRATCH_SIZES + 4)
                    .call(sizes)
                    .local_tee(errno)
                    .if_(BlockType::Empty)
                    .local_get(errno)
                    .return_()
                    .end()
                    .i32_const(SCRATCH_SIZES)
                    .i32_load(mem(0))
                    .local_set(count);
            }
            // Each pointer written back, from the real address to the
            // program's.
            sink.block(BlockType::Empty)
                .loop_(BlockType::Empty)
                .local_get(i)
                .local_get(count)
                .i32_ge_u()
                .br_if(1)
                .local_get(base)
                .local_get(i)
                .i32_const(2)
                .i32_shl()
                .i32_add()
                .local_get(base)
                .local_get(i)
                .i32_const(2)
                .i32_shl()
                .i32_add()
                .i32_load(mem(0))
                .i32_const(D as i32)
                .i32_sub()
                .i32_store(mem(0))
                .local_get(i)
                .i32_const(1)
                .i32_add()
                .local_set(i)
                .br(0)
                .end()
                .end()
                .i32_const(0)
                .end();
            f
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARGS: &[u8] = include_bytes!("../../../tests/p1/args.wasm");

    fn shifted(module: &[u8]) -> Vec<u8> {
        match shift(module, ("wasi:cli/exit@0.2.12", "exit-with-code")).unwrap() {
            Shifted::Done(bytes, redirected) => {
                assert!(redirected, "args.wat imports proc_exit");
                bytes
            }
            Shifted::NotApplicable(why) => panic!("not shifted: {why}"),
        }
    }

    #[test]
    fn the_program_moves_up_and_the_adapter_gets_the_pages_below_it() {
        let bytes = shifted(ARGS);
        wasmparser::Validator::new().validate_all(&bytes).unwrap();
        let mut memory = None;
        let mut exports = Vec::new();
        let mut data = Vec::new();
        for payload in Parser::new(0).parse_all(&bytes) {
            match payload.unwrap() {
                Payload::MemorySection(r) => memory = Some(r.into_iter().next().unwrap().unwrap()),
                Payload::ExportSection(r) => {
                    exports.extend(r.into_iter().map(|e| e.unwrap().name.to_string()))
                }
                Payload::DataSection(r) => {
                    for d in r {
                        if let wasmparser::DataKind::Active { offset_expr, .. } = d.unwrap().kind {
                            let mut ops = offset_expr.get_operators_reader();
                            if let Operator::I32Const { value } = ops.read().unwrap() {
                                data.push(value as u32);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        // `(memory 1)` plus the reserved pages; `(data (i32.const 48))` moved.
        assert_eq!(memory.unwrap().initial, 1 + u64::from(RESERVED_PAGES));
        assert_eq!(data, [48 + D]);
        assert_eq!(exports, ["memory", "_start", "cabi_realloc"]);
    }

    /// The imports of `bytes`, as `module.name`.
    fn import_names(bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for payload in Parser::new(0).parse_all(bytes) {
            if let Payload::ImportSection(r) = payload.unwrap() {
                for i in r.into_imports() {
                    let i = i.unwrap();
                    out.push(format!("{}.{}", i.module, i.name));
                }
            }
        }
        out
    }

    /// security round 3, item 8: a module that writes with iovecs gets
    /// `fd_fdstat_get` appended to its imports (its wrappers of an empty
    /// write ask it about the descriptor), its own functions moved up by
    /// one with their names; one that imports it already keeps its
    /// imports as they were.
    #[test]
    fn an_empty_write_can_ask_whether_its_descriptor_exists() {
        let badfd = include_bytes!("../../../tests/p1/badfd.wasm");
        let Shifted::Done(bytes, _) = shift(badfd, ("m", "n")).unwrap() else {
            panic!("badfd.wasm is shifted");
        };
        wasmparser::Validator::new().validate_all(&bytes).unwrap();
        assert_eq!(
            import_names(&bytes),
            [
                "wasi_snapshot_preview1.fd_write",
                "wasi_snapshot_preview1.fd_read",
                "wasi_snapshot_preview1.fd_fdstat_get"
            ]
        );
        // `$put`, the module's first function (2), is named at 3.
        let mut names = Vec::new();
        for payload in Parser::new(0).parse_all(&bytes) {
            if let Payload::CustomSection(c) = payload.unwrap() {
                if let wasmparser::KnownCustom::Name(reader) = c.as_known() {
                    for name in reader {
                        if let wasmparser::Name::Function(map) = name.unwrap() {
                            for n in map {
                                let n = n.unwrap();
                                names.push((n.index, n.name.to_string()));
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(
            names[..3],
            [
                (0, "fd_write".into()),
                (1, "fd_read".into()),
                (3, "put".into())
            ]
        );
        // The control: `fd_fdstat_get` already imported, nothing appended.
        let mut module = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([ValType::I32; 4], [ValType::I32]);
        types.ty().function([ValType::I32; 2], [ValType::I32]);
        types.ty().function([], []);
        module.section(&types);
        let mut imports = ImportSection::new();
        imports.import(P1, "fd_write", EntityType::Function(0));
        imports.import(P1, "fd_fdstat_get", EntityType::Function(1));
        module.section(&imports);
        let mut functions = FunctionSection::new();
        functions.function(2);
        module.section(&functions);
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
        exports.export("_start", wasm_encoder::ExportKind::Func, 2);
        module.section(&exports);
        let mut code = CodeSection::new();
        let mut start = Function::new([]);
        start.instructions().end();
        code.function(&start);
        module.section(&code);
        let own = module.finish();
        let Shifted::Done(bytes, _) = shift(&own, ("m", "n")).unwrap() else {
            panic!("the module is shifted");
        };
        wasmparser::Validator::new().validate_all(&bytes).unwrap();
        assert_eq!(
            import_names(&bytes),
            [
                "wasi_snapshot_preview1.fd_write",
                "wasi_snapshot_preview1.fd_fdstat_get"
            ]
        );
    }

    #[test]
    fn a_module_that_imports_its_memory_is_left_as_it_is() {
        let mut module = Module::new();
        let mut imports = ImportSection::new();
        imports.import(
            "env",
            "memory",
            EntityType::Memory(MemoryType {
                minimum: 1,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            }),
        );
        module.section(&imports);
        match shift(&module.finish(), ("m", "n")).unwrap() {
            Shifted::NotApplicable(why) => assert!(why.contains("memory"), "{why}"),
            Shifted::Done(..) => panic!("an imported memory cannot move"),
        }
    }
}
