//! Building the ProD Coq plugin (`plugin/`), which every checking Coq process loads:
//!
//! * the **term audit** (`prod_audit.ml`): `ProdAuditMark.` once the context is loaded, then
//!   `ProdAudit name "nonce" "constructs".` after the checker's `Qed` walks the kernel's term of
//!   the proved constant and of every constant it reaches that the context did not have,
//!   refusing the constructs the release's known kernel bugs need (`bugs.rs`); the cold re-check
//!   of an assembled file ends with `ProdAuditAll`. Without it no verdict is `Proved`, so the
//!   checker does not start without the plugin;
//! * on Coq 8.16 also `ProdAssumptions name.`, which prints exactly what `Print Assumptions
//!   name.` prints but remembers, across calls in one coqtop, the walk of each library
//!   constant's body (keyed by its name and the identity of its kernel record), so a check pays
//!   only for the new proof (`prod_assumptions.ml`, derived from Coq 8.16's
//!   `vernac/assumptions.ml`). Rocq 9.2 prints its assumptions with `Print Assumptions`.
//!
//! The plugin is compiled once per (sources, prover version, OCaml version) into a cache
//! directory that must be readable inside the checker's sandbox (not `/tmp`: the sandbox has its
//! own), by the prover's own toolchain: the host's, or the prover root's inside the sandbox
//! (`libcoq-core-ocaml-dev` and `ocaml-findlib`, which `scripts/install-deps.sh` and
//! `scripts/install-rocq.sh` install).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::config::CoqCheckConfig;
use crate::sandbox;

const ASSUMPTIONS_ML: &str = include_str!("../plugin/prod_assumptions.ml");
const AUDIT_ML_COQ8: &str = include_str!("../plugin/prod_audit.ml");
const AUDIT_ML_ROCQ9: &str = include_str!("../plugin/rocq9/prod_audit.ml");
const GRAMMAR_COQ8: &str = include_str!("../plugin/g_prod_assumptions.mlg");
const GRAMMAR_ROCQ9: &str = include_str!("../plugin/rocq9/g_prod_assumptions.mlg");
const META_COQ8: &str = include_str!("../plugin/META");
const META_ROCQ9: &str = include_str!("../plugin/rocq9/META");

/// The findlib package (its `META` is in `<ml_path>/coq-prod-assumptions/`).
pub const FINDLIB_PACKAGE: &str = "coq-prod-assumptions";
/// The sentence that loads the plugin (Coq 8.16 and Rocq 9 load plugins by findlib name).
pub const DECLARE_SENTENCE: &str = "Declare ML Module \"coq-prod-assumptions.plugin\".";
/// The command the plugin adds on Coq 8.16; `PRINT_COMMAND name.` replaces `Print Assumptions
/// name.`.
pub const PRINT_COMMAND: &str = "ProdAssumptions";
/// The sentence that makes the current environment the term audit's trusted base.
pub const MARK_SENTENCE: &str = "ProdAuditMark.";

const CMXS: &str = "prod_assumptions_plugin.cmxs";

pub use crate::config::PluginPaths;

/// The plugin's sources for one prover generation.
struct Sources {
    /// `(file name, text)` of each OCaml module, in link order; the grammar comes last.
    modules: &'static [(&'static str, &'static str)],
    grammar: &'static str,
    meta: &'static str,
    /// The findlib package of the prover's OCaml API.
    api: &'static str,
    assumptions: bool,
}

const COQ8: Sources = Sources {
    modules: &[
        ("prod_assumptions.ml", ASSUMPTIONS_ML),
        ("prod_audit.ml", AUDIT_ML_COQ8),
    ],
    grammar: GRAMMAR_COQ8,
    meta: META_COQ8,
    api: "coq-core.vernac",
    assumptions: true,
};

const ROCQ9: Sources = Sources {
    modules: &[("prod_audit.ml", AUDIT_ML_ROCQ9)],
    grammar: GRAMMAR_ROCQ9,
    meta: META_ROCQ9,
    api: "rocq-runtime.vernac",
    assumptions: false,
};

/// The sources for the prover `coqc --version` describes (Coq 8.x or Rocq 9.x).
fn sources_for(version: &str) -> Result<&'static Sources, String> {
    let v = version
        .split("version")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("");
    match v.split('.').next() {
        Some("8") => Ok(&COQ8),
        Some("9") => Ok(&ROCQ9),
        _ => Err(format!(
            "no ProD plugin sources for this prover: {}",
            version.lines().next().unwrap_or(version)
        )),
    }
}

/// A tool of the prover's toolchain (the host's, or the prover root's inside the sandbox),
/// run in `dir` (mounted as the sandbox's `/work`); its standard output, or an error naming the
/// command.
fn run_tool(
    cfg: &CoqCheckConfig,
    program: &str,
    args: &[&str],
    dir: Option<&Path>,
) -> Result<String, String> {
    // Compilers need more address space than a proof check.
    let build = CoqCheckConfig {
        memory_limit_mb: cfg.memory_limit_mb.max(8192),
        plugin: None,
        ..cfg.clone()
    };
    let mut cmd = sandbox::command(&build, Path::new(program), args, dir);
    cmd.stdin(std::process::Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{program} {}` failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The sources and the cache key: the sources and the exact tool versions (a plugin built for
/// another prover or OCaml would not load, or worse, load wrongly).
fn build_key(cfg: &CoqCheckConfig) -> Result<(&'static Sources, String), String> {
    let coqc = cfg.coqc.to_string_lossy();
    let version = run_tool(cfg, &coqc, &["--version"], None)?;
    let sources = sources_for(&version)?;
    let ocaml = run_tool(cfg, "ocamlfind", &["ocamlopt", "-version"], None)
        .map_err(|e| format!("OCaml (ocamlfind, ocamlopt) is missing: {e}"))?;
    let api = run_tool(cfg, "ocamlfind", &["query", sources.api], None)
        .map_err(|e| format!("the prover's OCaml development files are missing: {e}"))?;
    let mut h = Sha256::new();
    let mut parts: Vec<&str> = sources.modules.iter().map(|(_, t)| *t).collect();
    parts.extend([sources.grammar, sources.meta, &version, &ocaml, &api]);
    if let Some(root) = &cfg.root {
        parts.push(root.to_str().unwrap_or(""));
    }
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    Ok((sources, hex::encode(&h.finalize()[..8])))
}

/// Compile the plugin for `cfg`'s prover into `cache_dir` unless an identical build is already
/// there. Safe to call from several processes at once (each builds in its own temporary
/// directory, and the finished directory is renamed into place).
pub fn ensure_built(cfg: &CoqCheckConfig, cache_dir: &Path) -> Result<PluginPaths, String> {
    let (sources, key) = build_key(cfg)?;
    let ml_path = cache_dir.join(format!("prod-plugin-{key}"));
    let pkg = ml_path.join(FINDLIB_PACKAGE);
    let paths = |build_time| PluginPaths {
        ml_path: ml_path.clone(),
        cmxs: pkg.join(CMXS),
        declare_sentence: DECLARE_SENTENCE,
        print_command: sources.assumptions.then_some(PRINT_COMMAND),
        build_time,
    };
    // The directory only appears by rename after a complete build.
    if pkg.join(CMXS).is_file() && pkg.join("META").is_file() {
        return Ok(paths(None));
    }
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| format!("cannot create {}: {e}", cache_dir.display()))?;
    let start = Instant::now();
    let tmp = tempfile::Builder::new()
        .prefix(".prod-plugin-build-")
        .tempdir_in(cache_dir)
        .map_err(|e| {
            format!(
                "cannot create a build directory in {}: {e}",
                cache_dir.display()
            )
        })?;
    write_sources(tmp.path(), sources)?;
    compile_plugin(cfg, tmp.path(), sources)?;
    match std::fs::rename(tmp.path().join("out"), &ml_path) {
        Ok(()) => {}
        // Another process finished the same build first: use its result.
        Err(_) if pkg.join(CMXS).is_file() => return Ok(paths(None)),
        Err(e) => {
            return Err(format!(
                "cannot move the plugin to {}: {e}",
                ml_path.display()
            ))
        }
    }
    Ok(paths(Some(start.elapsed())))
}

/// The plugin for `cfg`'s prover, built once per process and cache directory.
pub fn for_config(cfg: &CoqCheckConfig) -> Result<PluginPaths, String> {
    type Memo = Vec<((PathBuf, Option<PathBuf>), Result<PluginPaths, String>)>;
    static BUILT: Mutex<Memo> = Mutex::new(vec![]);
    if let Some(p) = &cfg.plugin {
        return Ok(p.clone());
    }
    let key = (cfg.plugin_dir(), cfg.root.clone());
    let mut memo = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = memo.iter().find(|(k, _)| *k == key) {
        return r.clone();
    }
    let r = ensure_built(cfg, &key.0).map_err(|e| {
        format!("the ProD Coq plugin (the checker's term audit) cannot be built: {e}")
    });
    memo.push((key, r.clone()));
    r
}

/// Write the sources into `<dir>/src` and the findlib `META` into
/// `<dir>/out/coq-prod-assumptions` (both created here), so that the build runs on these files
/// alone.
fn write_sources(dir: &Path, sources: &Sources) -> Result<(), String> {
    let src = dir.join("src");
    let out_pkg = dir.join("out").join(FINDLIB_PACKAGE);
    for d in [&src, &out_pkg] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let write = |p: PathBuf, text: &str| {
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    for (name, text) in sources.modules {
        write(src.join(name), text)?;
    }
    write(src.join("g_prod_assumptions.mlg"), sources.grammar)?;
    write(out_pkg.join("META"), sources.meta)?;
    Ok(())
}

/// Compile the sources in `<dir>/src` (the grammar through `coqpp`, each module with
/// `ocamlopt`) and link them into the shared plugin in `<dir>/out`. The tools run where the
/// prover runs, with `dir` as their working directory `/work`.
fn compile_plugin(cfg: &CoqCheckConfig, dir: &Path, sources: &Sources) -> Result<(), String> {
    // Inside the sandbox `dir` is `/work`; without it, the tools run in `dir` itself.
    let base = if cfg.sandbox {
        PathBuf::from("/work")
    } else {
        dir.to_path_buf()
    };
    let src = base.join("src");
    let at = |f: &str| src.join(f).to_string_lossy().into_owned();
    run_tool(cfg, "coqpp", &[&at("g_prod_assumptions.mlg")], Some(dir))?;
    let mut objects = vec![];
    let modules = sources
        .modules
        .iter()
        .map(|(name, _)| *name)
        .chain(["g_prod_assumptions.ml"]);
    for name in modules {
        let file = at(name);
        run_tool(
            cfg,
            "ocamlfind",
            &[
                "ocamlopt",
                "-package",
                sources.api,
                "-rectypes",
                "-thread",
                "-w",
                "-a",
                "-I",
                &at(""),
                "-c",
                &file,
            ],
            Some(dir),
        )?;
        objects.push(file.replace(".ml", ".cmx"));
    }
    let cmxs = base
        .join("out")
        .join(FINDLIB_PACKAGE)
        .join(CMXS)
        .to_string_lossy()
        .into_owned();
    let mut args = vec!["ocamlopt", "-shared", "-o", &cmxs];
    args.extend(objects.iter().map(String::as_str));
    run_tool(cfg, "ocamlfind", &args, Some(dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_follow_the_prover_generation() {
        let coq =
            sources_for("The Coq Proof Assistant, version 8.16.1\ncompiled with OCaml 4.13.1");
        assert!(coq.is_ok_and(|s| s.assumptions && s.api == "coq-core.vernac"));
        let rocq = sources_for("The Rocq Prover, version 9.2.0\ncompiled with OCaml 5.4.1");
        assert!(rocq.is_ok_and(|s| !s.assumptions && s.api == "rocq-runtime.vernac"));
        assert!(sources_for("The Coq Proof Assistant, version 7.4").is_err());
        assert!(sources_for("nonsense").is_err());
    }
}
