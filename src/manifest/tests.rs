use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::policy::PathGlob;

const FILE: &str = "guests/x/executor.toml";

/// A valid manifest with `extra` appended at top level (before any table).
fn with(extra: &str) -> String {
    format!("name = \"write-file\"\ncomponent = \"c.wasm\"\n{extra}")
}

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(Path::new(FILE), text)
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(m) => panic!("expected an error, got {m:?}"),
        Err(e) => {
            assert!(e.is_invalid_input(), "{e}");
            e.to_string()
        }
    }
}

fn cap(name: &str, target: Option<&str>) -> String {
    match target {
        Some(t) => format!("\n[[capabilities]]\nname = \"{name}\"\ntarget = \"{t}\"\n"),
        None => format!("\n[[capabilities]]\nname = \"{name}\"\n"),
    }
}

#[test]
fn valid_manifest_round_trips() {
    let text = r#"
name = "write-file"
description = "writes a file"
component = "../../guests/target/wasm32-wasip2/release/write_file.wasm"
sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
revertible = true
reverse_pattern = "restore_blob_backup"
input_schema = { type = "object", required = ["path"], properties = { path = { type = "string" } } }

[[capabilities]]
name = "fs:write"
target = "out/**"

[[capabilities]]
name = "fs:read"
target = "~/notes/*.md"
mount = "/notes"

[[capabilities]]
name = "network:sites"
target = "example.com:443"

[[capabilities]]
name = "time:read"
"#;
    let m = parse(text).unwrap();
    assert_eq!(
        m,
        Manifest {
            path: PathBuf::from(FILE),
            name: "write-file".into(),
            description: Some("writes a file".into()),
            component: PathBuf::from(
                "guests/x/../../guests/target/wasm32-wasip2/release/write_file.wasm"
            ),
            command: vec![],
            sha256: Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into()),
            revertible: true,
            reverse_pattern: Some("restore_blob_backup".into()),
            tools: vec![],
            input_schema: Some(serde_json::json!({
                "type": "object",
                "required": ["path"],
                "properties": { "path": { "type": "string" } }
            })),
            capabilities: vec![
                ManifestCapability {
                    capability: Capability::FsWrite,
                    target: Some("out/**".into()),
                    mount: None,
                    methods: None,
                },
                ManifestCapability {
                    capability: Capability::FsRead,
                    target: Some("~/notes/*.md".into()),
                    mount: Some("/notes".into()),
                    methods: None,
                },
                ManifestCapability {
                    capability: Capability::NetworkSites,
                    target: Some("example.com:443".into()),
                    mount: None,
                    methods: None,
                },
                ManifestCapability {
                    capability: Capability::TimeRead,
                    target: None,
                    mount: None,
                    methods: None,
                },
            ],
        }
    );

    let def = m
        .to_definition(Path::new("/ws/proj"), Some(Path::new("/home/a")))
        .unwrap();
    assert_eq!(
        def,
        ExecutorDef {
            component: "guests/x/../../guests/target/wasm32-wasip2/release/write_file.wasm".into(),
            command: vec![],
            sha256: m.sha256.clone(),
            capabilities: vec![
                DeclaredCapability {
                    capability: Capability::FsWrite,
                    target: Some("/ws/proj/out/**".into()),
                    mount: None,
                    methods: None,
                },
                DeclaredCapability {
                    capability: Capability::FsRead,
                    target: Some("/home/a/notes/*.md".into()),
                    mount: Some("/notes".into()),
                    methods: None,
                },
                DeclaredCapability {
                    capability: Capability::NetworkSites,
                    target: Some("example.com:443".into()),
                    mount: None,
                    methods: None,
                },
                DeclaredCapability {
                    capability: Capability::TimeRead,
                    target: None,
                    mount: None,
                    methods: None,
                },
            ],
            revertible: true,
            reverse_pattern: Some("restore_blob_backup".into()),
            tools: vec![],
        }
    );
    for c in &def.capabilities {
        if c.capability.target_kind() == TargetKind::PathGlob {
            assert!(PathGlob::parse(c.target.as_deref().unwrap()).is_ok());
        }
    }
}

#[test]
fn minimal_manifest_has_defaults() {
    let m = parse(&with("")).unwrap();
    assert_eq!(m.description, None);
    assert_eq!(m.component, PathBuf::from("guests/x/c.wasm"));
    assert!(!m.revertible);
    assert_eq!(m.reverse_pattern, None);
    assert!(m.tools.is_empty() && m.capabilities.is_empty());
    assert_eq!(m.input_schema, None);
}

#[test]
fn absolute_component_is_kept() {
    let m = parse("name = \"a\"\ncomponent = \"/opt/a.wasm\"\n").unwrap();
    assert_eq!(m.component, PathBuf::from("/opt/a.wasm"));
    let m = Manifest::parse(
        Path::new("executor.toml"),
        "name = \"a\"\ncomponent = \"a.wasm\"\n",
    )
    .unwrap();
    assert_eq!(m.component, PathBuf::from("a.wasm"));
}

#[test]
fn typo_field_is_named() {
    let msg = err(&with("revertable = true\n"));
    assert!(msg.contains("unknown field `revertable`"), "{msg}");
    assert!(msg.contains(FILE), "{msg}");
    assert_eq!(
        msg,
        "`guests/x/executor.toml`: line 3, column 1: unknown field `revertable`, expected one of \
         `name`, `description`, `component`, `command`, `sha256`, `revertible`, `reverse_pattern`, \
         `tools`, `input_schema`, `capabilities`"
    );
}

#[test]
fn typo_in_capability_field_is_named() {
    let msg = err(&with(
        "[[capabilities]]\nname = \"fs:read\"\ntarger = \"/x/**\"\n",
    ));
    assert_eq!(
        msg,
        "`guests/x/executor.toml`: line 5, column 1: unknown field `targer`, expected one of `name`, `target`, `mount`, `methods`"
    );
}

#[test]
fn syntax_and_shape_errors_name_the_file() {
    assert_eq!(
        err("name = \"a\"\ncomponent = \n"),
        "`guests/x/executor.toml`: line 2, column 13: invalid string; expected `\"`, `'`"
    );
}

#[test]
fn missing_required_field() {
    assert_eq!(
        err("name = \"a\"\n"),
        "`guests/x/executor.toml`: field `component`: required (or `command`, for an executor that runs a host command)"
    );
    assert_eq!(
        err(&with("[[capabilities]]\ntarget = \"/x\"\n")),
        "`guests/x/executor.toml`: line 3, column 1: missing field `name`"
    );
}

#[test]
fn wrong_type_is_named() {
    assert_eq!(
        err(&with("revertible = \"yes\"\n")),
        "`guests/x/executor.toml`: line 3, column 14: invalid type: string \"yes\", expected a boolean"
    );
    assert_eq!(
        err(&with("input_schema = \"object\"\n")),
        "`guests/x/executor.toml`: line 3, column 16: invalid type: string \"object\", expected a map"
    );
}

#[test]
fn bad_name() {
    assert_eq!(
        err("name = \"Write\"\ncomponent = \"c.wasm\"\n"),
        "`guests/x/executor.toml`: field `name`: invalid executor name `Write`: it must match \
         `[a-z0-9][a-z0-9_-]{0,63}`"
    );
    assert!(parse(&format!(
        "name = \"{}\"\ncomponent = \"c\"\n",
        "a".repeat(64)
    ))
    .is_ok());
    assert!(parse(&format!(
        "name = \"{}\"\ncomponent = \"c\"\n",
        "a".repeat(65)
    ))
    .is_err());
    assert!(parse("name = \"-a\"\ncomponent = \"c\"\n").is_err());
    assert!(parse("name = \"\"\ncomponent = \"c\"\n").is_err());
    assert!(parse("name = \"0a_b-c\"\ncomponent = \"c\"\n").is_ok());
}

#[test]
fn empty_component() {
    assert_eq!(
        err("name = \"a\"\ncomponent = \"\"\n"),
        "`guests/x/executor.toml`: field `component`: it is empty"
    );
}

#[test]
fn unknown_capability_names_field_and_value() {
    assert_eq!(
        err(&with(&cap("fs:delete", Some("/x/**")))),
        "`guests/x/executor.toml`: field `capabilities[0].name`: unknown capability `fs:delete`"
    );
    let text = with(&(cap("time:read", None) + &cap("fs:delete", None)));
    assert_eq!(
        err(&text),
        "`guests/x/executor.toml`: field `capabilities[1].name`: unknown capability `fs:delete`"
    );
}

#[test]
fn missing_target_for_fs_read() {
    assert_eq!(
        err(&with(&cap("fs:read", None))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: `fs:read` needs a target of kind `path_glob`"
    );
    assert_eq!(
        err(&with(&cap("env:read", None))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: `env:read` needs a target of kind `exact`"
    );
}

#[test]
fn target_given_for_time_read() {
    assert_eq!(
        err(&with(&cap("time:read", Some("now")))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: `time:read` takes no target, got `now`"
    );
}

#[test]
fn malformed_glob() {
    assert_eq!(
        err(&with(&cap("fs:write", Some("out/[a]")))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: malformed path glob `out/[a]`: \
         brackets and braces are not supported; use `*`, `?` and `**`"
    );
    assert_eq!(
        err(&with(&cap("fs:write", Some("out//x")))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: malformed path glob `out//x`: \
         it has an empty segment (`//` or a trailing `/`)"
    );
    assert_eq!(
        err(&with(&cap("fs:write", Some("")))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: malformed path glob ``: \
         it names no path; use `**` for the whole workspace"
    );
    assert_eq!(
        err(&with(&cap("fs:write", Some("~bob/x")))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: malformed path glob `~bob/x`: \
         only `~/` is supported, not `~user`"
    );
}

#[test]
fn dotdot_in_target() {
    for target in ["../x/**", "out/../../x", "~/../x", "/a/../b"] {
        assert_eq!(
            err(&with(&cap("fs:read", Some(target)))),
            format!(
                "`guests/x/executor.toml`: field `capabilities[0].target`: malformed path glob \
                 `{target}`: `..` segments are not allowed"
            )
        );
    }
}

#[test]
fn path_target_forms() {
    let text = with(
        &(cap("fs:read", Some("/abs/**"))
            + "mount = \"/abs\"\n"
            + &cap("fs:read", Some("./rel/*.txt"))
            + &cap("fs:read", Some("~"))
            + "mount = \"/home\"\n"
            + &cap("fs:read", Some("**"))),
    );
    let m = parse(&text).unwrap();
    let def = m
        .to_definition(Path::new("/ws"), Some(Path::new("/home/a/")))
        .unwrap();
    let targets: Vec<_> = def
        .capabilities
        .iter()
        .map(|c| c.target.clone().unwrap())
        .collect();
    assert_eq!(targets, ["/abs/**", "/ws/rel/*.txt", "/home/a", "/ws/**"]);
    // The root as a workspace does not produce `//`.
    let def = m
        .to_definition(Path::new("/"), Some(Path::new("/")))
        .unwrap();
    let targets: Vec<_> = def
        .capabilities
        .iter()
        .map(|c| c.target.clone().unwrap())
        .collect();
    assert_eq!(targets, ["/abs/**", "/rel/*.txt", "/", "/**"]);
}

#[test]
fn resolution_errors() {
    let m = parse(&with(&cap("fs:read", Some("~/notes/**")))).unwrap();
    assert_eq!(
        m.to_definition(Path::new("/ws"), None)
            .unwrap_err()
            .to_string(),
        "`guests/x/executor.toml`: field `capabilities[0].target`: cannot resolve `~/notes/**`: \
         no home directory is known"
    );
    let m = parse(&with(&cap("fs:write", Some("out/**")))).unwrap();
    assert_eq!(
        m.to_definition(Path::new("ws"), None)
            .unwrap_err()
            .to_string(),
        "`guests/x/executor.toml`: field `capabilities[0].target`: the workspace `ws` is not an \
         absolute path"
    );
    // A wildcard in the directory's own name would widen the grant.
    assert_eq!(
        m.to_definition(Path::new("/tmp/a*"), None)
            .unwrap_err()
            .to_string(),
        "`guests/x/executor.toml`: field `capabilities[0].target`: the workspace `/tmp/a*` \
         contains `*` or `?`, so its paths cannot be written as a glob"
    );
    assert_eq!(
        m.to_definition(Path::new("/tmp/p[1]"), None)
            .unwrap_err()
            .to_string(),
        "`guests/x/executor.toml`: field `capabilities[0].target`: cannot resolve `out/**` to a \
         valid absolute glob: malformed path glob `/tmp/p[1]/out/**`: brackets and braces are not \
         supported; use `*`, `?` and `**`"
    );
}

#[test]
fn host_and_exact_targets_are_checked() {
    assert_eq!(
        err(&with(&cap("network:sites", Some("example.com:0")))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: malformed host \
         `example.com:0`: the port must be a number from 1 to 65535"
    );
    assert_eq!(
        err(&with(&cap("env:read", Some("HO*")))),
        "`guests/x/executor.toml`: field `capabilities[0].target`: malformed name `HO*`: \
         an exact name cannot contain wildcards"
    );
}

#[test]
fn revertible_without_pattern() {
    assert_eq!(
        err(&with("revertible = true\n")),
        "`guests/x/executor.toml`: field `reverse_pattern`: required when `revertible = true`; \
         one of `swap_src_dst`, `delete_created_dirs`, `delete_created_paths`, \
         `restore_blob_backup`, `delete_memory_by_id`"
    );
}

#[test]
fn pattern_not_in_catalogue() {
    assert_eq!(
        err(&with("revertible = true\nreverse_pattern = \"rm_rf\"\n")),
        "`guests/x/executor.toml`: field `reverse_pattern`: unknown reverse pattern `rm_rf`; \
         one of `swap_src_dst`, `delete_created_dirs`, `delete_created_paths`, \
         `restore_blob_backup`, `delete_memory_by_id`"
    );
}

#[test]
fn pattern_without_revertible() {
    assert_eq!(
        err(&with("reverse_pattern = \"swap_src_dst\"\n")),
        "`guests/x/executor.toml`: field `reverse_pattern`: `swap_src_dst` is set but \
         `revertible` is false"
    );
}

#[test]
fn every_catalogued_pattern_is_accepted() {
    for pattern in REVERSE_PATTERNS {
        let text = with(&format!(
            "revertible = true\nreverse_pattern = \"{pattern}\"\n{}{}",
            cap("memory:write", Some("notes")),
            cap("fs:write", Some("out/**"))
        ));
        assert!(parse(&text).is_ok(), "{pattern}");
    }
}

/// Issue 27, point 9: a reverse pattern must reverse something the
/// executor can do: `swap_src_dst` with `compute:pure` only is refused,
/// naming the pattern and what it needs; with `fs:write` it passes.
#[test]
fn a_reverse_pattern_needs_a_capability_whose_operations_it_reverses() {
    let pure = with(&format!(
        "revertible = true\nreverse_pattern = \"swap_src_dst\"\n{}",
        cap("compute:pure", None)
    ));
    assert_eq!(
        err(&pure),
        "`guests/x/executor.toml`: field `reverse_pattern`: `swap_src_dst` reverses what \
         `fs:write` does, and the executor declares none of it"
    );
    let memory_only = with(&format!(
        "revertible = true\nreverse_pattern = \"delete_created_paths\"\n{}",
        cap("memory:write", Some("notes"))
    ));
    assert!(err(&memory_only).contains("`delete_created_paths` reverses what `fs:write` does"));
    let restore = with(&format!(
        "revertible = true\nreverse_pattern = \"restore_blob_backup\"\n{}",
        cap("memory:write", Some("notes"))
    ));
    assert!(parse(&restore).is_ok());
    let fs = with(&format!(
        "revertible = true\nreverse_pattern = \"swap_src_dst\"\n{}",
        cap("fs:write", Some("out/**"))
    ));
    assert!(parse(&fs).is_ok());
}

#[test]
fn delete_memory_by_id_needs_memory_write() {
    let text = with(&format!(
        "revertible = true\nreverse_pattern = \"delete_memory_by_id\"\n{}",
        cap("memory:read", Some("notes"))
    ));
    assert_eq!(
        err(&text),
        "`guests/x/executor.toml`: field `reverse_pattern`: `delete_memory_by_id` reverses \
         what `memory:write` does, and the executor declares none of it"
    );
}

#[test]
fn tools_without_code_exec() {
    assert_eq!(
        err(&with("tools = [\"ls\"]\n")),
        "`guests/x/executor.toml`: field `tools`: `tools` is only allowed when `code:exec` is \
         declared"
    );
    assert!(err(&with("tools = []\n")).contains("only allowed"));
}

#[test]
fn code_exec_needs_tools() {
    let exec = cap("code:exec", Some("ls"));
    for tools in ["", "tools = []\n"] {
        assert_eq!(
            err(&with(&format!("{tools}{exec}"))),
            "`guests/x/executor.toml`: field `tools`: `code:exec` is declared, so `tools` must \
             list at least one tool"
        );
    }
    assert_eq!(
        err(&with(&format!("tools = [\"ls\", \"rm -rf\"]\n{exec}"))),
        "`guests/x/executor.toml`: field `tools[1]`: invalid tool `rm -rf`: it must be a \
         non-empty program name or path without whitespace"
    );
    let m = parse(&with(&format!(
        "tools = [\"ls\", \"/usr/bin/cat\"]\n{exec}"
    )))
    .unwrap();
    assert_eq!(m.tools, ["ls", "/usr/bin/cat"]);
    let def = m.to_definition(Path::new("/ws"), None).unwrap();
    assert_eq!(def.tools, ["ls", "/usr/bin/cat"]);
}

#[test]
fn bad_sha256_format() {
    for digest in ["abc", &"A".repeat(64), &"g".repeat(64), &"a".repeat(65)] {
        assert_eq!(
            err(&with(&format!("sha256 = \"{digest}\"\n"))),
            format!(
                "`guests/x/executor.toml`: field `sha256`: `{digest}` is not 64 lowercase hex \
                 digits"
            )
        );
    }
}

#[test]
fn non_finite_float_in_schema() {
    assert_eq!(
        err(&with("input_schema = { maximum = nan }\n")),
        "`guests/x/executor.toml`: field `input_schema.maximum`: `NaN` cannot be represented in \
         JSON"
    );
}

const ABC_SHA256: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

fn write_manifest(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn digest_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("c.wasm"), b"abd").unwrap();
    let path = write_manifest(
        tmp.path(),
        "executor.toml",
        &with(&format!("sha256 = \"{ABC_SHA256}\"\n")),
    );
    let m = Manifest::load(&path).unwrap();
    let e = m.verify_component().unwrap_err();
    let msg = e.to_string();
    match e {
        ManifestError::DigestMismatch {
            component,
            expected,
            actual,
        } => {
            assert_eq!(component, tmp.path().join("c.wasm"));
            assert_eq!(expected, ABC_SHA256);
            assert_eq!(actual, crate::policy::snapshot::sha256_hex(b"abd"));
            assert_eq!(
                msg,
                format!(
                    "DIGEST_MISMATCH: component `{}` has sha256 `{actual}`, but its manifest \
                     pins `{expected}`",
                    component.display()
                )
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(msg.contains("DIGEST_MISMATCH"));
    let e = m.verify_component().unwrap_err();
    assert_eq!(e.deny_code(), Some(crate::policy::DenyCode::DigestMismatch));
}

#[test]
fn matching_digest_ok() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("c.wasm"), b"abc").unwrap();
    let path = write_manifest(
        tmp.path(),
        "executor.toml",
        &with(&format!("sha256 = \"{ABC_SHA256}\"\n")),
    );
    let m = Manifest::load(&path).unwrap();
    assert_eq!(m.verify_component().unwrap(), ABC_SHA256);
    // Unpinned: the digest is still computed and returned.
    let m = Manifest { sha256: None, ..m };
    assert_eq!(m.verify_component().unwrap(), ABC_SHA256);
}

#[test]
fn missing_component() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_manifest(tmp.path(), "executor.toml", &with(""));
    let m = Manifest::load(&path).unwrap();
    let e = m.verify_component().unwrap_err();
    assert!(matches!(e, ManifestError::ComponentMissing { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "`{}`: field `component`: `{}` does not exist",
            path.display(),
            tmp.path().join("c.wasm").display()
        )
    );
}

#[test]
fn missing_manifest_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("nope.toml");
    let e = Manifest::load(&path).unwrap_err();
    assert!(!e.is_invalid_input());
    let msg = e.to_string();
    assert_eq!(
        msg,
        format!(
            "cannot read `{}`: no such file or directory (os error 2)",
            path.display()
        )
    );
}

#[test]
fn find_by_name_finds_nested_and_flat_manifests() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("executors");
    let nested = write_manifest(
        &dir,
        "x/executor.toml",
        "name = \"x\"\ncomponent = \"x.wasm\"\n",
    );
    let flat = write_manifest(&dir, "y.toml", "name = \"y\"\ncomponent = \"y.wasm\"\n");
    // Not manifests: no top-level name, or too deep.
    write_manifest(&dir, "other.toml", "[package]\nname = \"x\"\n");
    write_manifest(
        &dir,
        "a/b/executor.toml",
        "name = \"deep\"\ncomponent = \"d.wasm\"\n",
    );
    let dirs = vec![tmp.path().join("missing"), dir.clone()];

    let m = find_by_name(&dirs, "x").unwrap().unwrap();
    assert_eq!(m.path, nested);
    assert_eq!(m.component, dir.join("x/x.wasm"));
    let m = find_by_name(&dirs, "y").unwrap().unwrap();
    assert_eq!(m.path, flat);
    assert!(find_by_name(&dirs, "deep").unwrap().is_none());
    assert!(find_by_name(&dirs, "z").unwrap().is_none());
    // The same directory listed twice is not a duplicate.
    let twice = vec![dir.clone(), dir.clone()];
    assert_eq!(find_by_name(&twice, "x").unwrap().unwrap().path, nested);
}

#[test]
fn find_by_name_reports_the_matching_manifest_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_manifest(
        tmp.path(),
        "x/executor.toml",
        "name = \"x\"\ncomponent = \"x.wasm\"\nrevertable = true\n",
    );
    let e = find_by_name(&[tmp.path().to_path_buf()], "x").unwrap_err();
    assert!(e.to_string().starts_with(&format!(
        "`{}`: line 3, column 1: unknown field `revertable`",
        path.display()
    )));
}

#[test]
fn find_by_name_refuses_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write_manifest(tmp.path(), "a/executor.toml", &with(""));
    let b = write_manifest(tmp.path(), "b.toml", &with(""));
    let e = find_by_name(&[tmp.path().to_path_buf()], "write-file").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "executor `write-file` is defined by two manifests: `{}` and `{}`",
            a.display(),
            b.display()
        )
    );
}

#[test]
fn find_by_name_reports_unparseable_files_when_nothing_matches() {
    let tmp = tempfile::tempdir().unwrap();
    let broken = write_manifest(tmp.path(), "x/executor.toml", "name = \"x\n");
    write_manifest(
        tmp.path(),
        "y.toml",
        "name = \"y\"\ncomponent = \"y.wasm\"\n",
    );
    let dirs = [tmp.path().to_path_buf()];
    assert!(find_by_name(&dirs, "y").unwrap().is_some());
    let e = find_by_name(&dirs, "x").unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("`{}`: line 1, column", broken.display())),
        "{e}"
    );
}

#[test]
fn discover_lists_every_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    let two = tmp.path().join("two");
    let x = write_manifest(
        &one,
        "x/executor.toml",
        "name = \"x\"\ncomponent = \"x.wasm\"\n",
    );
    let y = write_manifest(&two, "y.toml", "name = \"y\"\ncomponent = \"y.wasm\"\n");
    write_manifest(&two, "notes.toml", "title = \"not a manifest\"\n");
    let dirs = vec![one.clone(), two.clone(), one.clone()];
    let paths: Vec<_> = discover(&dirs)
        .unwrap()
        .into_iter()
        .map(|m| m.path)
        .collect();
    assert_eq!(paths, [x, y]);

    // A broken manifest is an error, not left out of the listing.
    let broken = write_manifest(&two, "z/executor.toml", "component = \"z.wasm\"\n");
    assert_eq!(
        discover(&dirs).unwrap_err().to_string(),
        format!("`{}`: missing field `name`", broken.display())
    );
    // And it is what `find_by_name` reports when nothing matches.
    assert_eq!(
        find_by_name(&dirs, "z").unwrap_err().to_string(),
        format!("`{}`: missing field `name`", broken.display())
    );
    assert!(find_by_name(&dirs, "x").unwrap().is_some());
}

const WC: &str = "[[capabilities]]\nname = \"code:exec\"\ntarget = \"wc\"\n";

#[test]
fn a_command_executor_declares_code_exec_on_its_program() {
    let m = parse(&format!(
        "name = \"count\"\ncommand = [\"wc\", \"-l\"]\ntools = [\"wc\"]\n{WC}"
    ))
    .unwrap();
    assert_eq!(m.command, vec!["wc".to_string(), "-l".to_string()]);
    assert_eq!(m.component, PathBuf::new());
    let def = m.to_definition(Path::new("/ws"), None).unwrap();
    assert_eq!(def.command, m.command);
    assert_eq!(def.component, "");
    // An absolute program is matched by its name.
    assert!(parse(&format!(
        "name = \"count\"\ncommand = [\"/usr/bin/wc\"]\ntools = [\"wc\"]\n{WC}"
    ))
    .is_ok());
}

#[test]
fn a_command_executor_is_refused_for_each_missing_piece() {
    let cases = [
        (
            format!("name = \"c\"\ncommand = [\"wc\"]\ncomponent = \"c.wasm\"\ntools = [\"wc\"]\n{WC}"),
            "field `command`: `command` and `component` exclude each other: an executor is one or the other",
        ),
        (
            format!("name = \"c\"\ncommand = []\ntools = [\"wc\"]\n{WC}"),
            "field `command`: it is empty: it must name a program",
        ),
        (
            format!("name = \"c\"\ncommand = [\"w c\"]\ntools = [\"wc\"]\n{WC}"),
            "field `command[0]`: invalid program `w c`: it must be a non-empty program name or path without whitespace",
        ),
        (
            format!("name = \"c\"\ncommand = [\"wc\", \"a\\u0007\"]\ntools = [\"wc\"]\n{WC}"),
            "field `command[1]`: `a\\u{7}` holds a control character",
        ),
        (
            format!("name = \"c\"\ncommand = [\"wc\"]\nsha256 = \"{}\"\ntools = [\"wc\"]\n{WC}", "a".repeat(64)),
            "field `sha256`: only a component can be pinned; a command executor has no component",
        ),
        (
            "name = \"c\"\ncommand = [\"wc\"]\n".to_string(),
            "field `capabilities`: a command executor must declare `code:exec` with target `wc`, the program it runs",
        ),
        (
            format!("name = \"c\"\ncommand = [\"cat\"]\ntools = [\"wc\"]\n{WC}"),
            "field `capabilities`: a command executor must declare `code:exec` with target `cat`, the program it runs",
        ),
        (
            "name = \"c\"\ncommand = [\"cat\"]\ntools = [\"wc\"]\n[[capabilities]]\nname = \"code:exec\"\ntarget = \"cat\"\n".to_string(),
            "field `tools`: `cat`, the program of `command`, must be listed",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            err(&text),
            format!("`guests/x/executor.toml`: {want}"),
            "{text}"
        );
    }
}

/// security round 3, item 3: `TRACE` and `CONNECT` are never sent, so a
/// manifest that lists one (in any case) is invalid and says why; `GET`
/// is the control.
#[test]
fn trace_and_connect_in_methods_are_refused_with_the_reason() {
    let site = |method: &str| {
        with(&format!(
            "\n[[capabilities]]\nname = \"network:sites\"\ntarget = \"https://api.example.com/**\"\nmethods = [\"GET\", \"{method}\"]\n"
        ))
    };
    for method in ["TRACE", "connect"] {
        assert_eq!(
            err(&site(method)),
            format!("`guests/x/executor.toml`: field `capabilities[0].methods`: `{method}` is never sent: gatehouse refuses `TRACE` and `CONNECT` whatever `methods` says")
        );
    }
    assert!(parse(&site("POST")).is_ok());
}
