//! Building the ProD Coq plugin (`plugin/`): the command `ProdAssumptions name.` prints exactly
//! what `Print Assumptions name.` prints, but remembers, across calls in one coqtop, the walk of
//! each library constant's body (keyed by its name and the identity of its kernel record), so a
//! check pays only for the new proof instead of re-walking the whole library closure each time.
//!
//! The plugin is compiled once per (sources, Coq version, OCaml version) into a cache directory
//! that must be readable inside the checker's sandbox (not `/tmp`: the sandbox has its own).
//! Without OCaml/findlib/Coq's development files, [`ensure_built`] returns `Err` and the checker
//! keeps using `Print Assumptions`.
//!
//! Self-contained (no `crate::` paths) so tests can include it with `#[path]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

const ML: &str = include_str!("../plugin/prod_assumptions.ml");
const MLG: &str = include_str!("../plugin/g_prod_assumptions.mlg");
const META: &str = include_str!("../plugin/META");

/// The findlib package (its `META` is in `<ml_path>/coq-prod-assumptions/`).
pub const FINDLIB_PACKAGE: &str = "coq-prod-assumptions";
/// The sentence that loads the plugin (Coq 8.16 loads plugins by findlib name).
pub const DECLARE_SENTENCE: &str = "Declare ML Module \"coq-prod-assumptions.plugin\".";
/// The command the plugin adds; `PRINT_COMMAND name.` replaces `Print Assumptions name.`.
pub const PRINT_COMMAND: &str = "ProdAssumptions";

const CMXS: &str = "prod_assumptions_plugin.cmxs";

/// What a coqtop needs to load the plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginPaths {
    /// Pass `-I <ml_path>` to coqtop/coqc (findlib looks for `coq-prod-assumptions/META`
    /// there); inside bubblewrap this directory must be bound read-only at the same path.
    pub ml_path: PathBuf,
    /// The compiled plugin (`<ml_path>/coq-prod-assumptions/prod_assumptions_plugin.cmxs`).
    pub cmxs: PathBuf,
    /// [`DECLARE_SENTENCE`], to send once per worker before loading the context.
    pub declare_sentence: &'static str,
    /// How long the build took; `None` when an earlier build was reused.
    pub build_time: Option<Duration>,
}

impl PluginPaths {
    /// coqtop arguments that make [`DECLARE_SENTENCE`] work.
    pub fn coqtop_args(&self) -> Vec<String> {
        vec!["-I".into(), self.ml_path.to_string_lossy().into_owned()]
    }

    /// Directories the sandbox must bind read-only at the same path (`--ro-bind d d`).
    pub fn ro_binds(&self) -> Vec<PathBuf> {
        vec![self.ml_path.clone()]
    }
}

/// Output of `program args…`, or an error naming the command.
fn run_tool(program: &str, args: &[&str], dir: Option<&Path>) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
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

/// The cache key: sources and the exact tool versions (a plugin built for another Coq or OCaml
/// would not load, or worse, load wrongly).
fn build_key() -> Result<String, String> {
    let coq = run_tool("coqc", &["--version"], None)?;
    let ocaml = run_tool("ocamlfind", &["ocamlopt", "-version"], None)?;
    // Coq's development files (findlib package `coq-core.vernac`, from libcoq-core-ocaml-dev).
    let core = run_tool("ocamlfind", &["query", "coq-core.vernac"], None)
        .map_err(|e| format!("Coq's OCaml development files are missing: {e}"))?;
    let mut h = Sha256::new();
    for part in [ML, MLG, META, &coq, &ocaml, &core] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    Ok(hex::encode(&h.finalize()[..8]))
}

/// Compile the plugin into `cache_dir` unless an identical build is already there. Safe to
/// call from several processes at once (each builds in its own temporary directory, and the
/// finished directory is renamed into place).
pub fn ensure_built(cache_dir: &Path) -> Result<PluginPaths, String> {
    let key = build_key()?;
    let ml_path = cache_dir.join(format!("prod-assumptions-{key}"));
    let pkg = ml_path.join(FINDLIB_PACKAGE);
    let paths = |build_time| PluginPaths {
        ml_path: ml_path.clone(),
        cmxs: pkg.join(CMXS),
        declare_sentence: DECLARE_SENTENCE,
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
        .prefix(".prod-assumptions-build-")
        .tempdir_in(cache_dir)
        .map_err(|e| {
            format!(
                "cannot create a build directory in {}: {e}",
                cache_dir.display()
            )
        })?;
    let src = tmp.path().join("src");
    let out = tmp.path().join("out");
    let out_pkg = out.join(FINDLIB_PACKAGE);
    write_sources(&src, &out_pkg)?;
    compile_plugin(&src, &out_pkg.join(CMXS))?;
    match std::fs::rename(&out, &ml_path) {
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

/// Write the plugin's sources into `src` and its findlib `META` into `out_pkg` (both created
/// here), so that the build runs on these files alone.
fn write_sources(src: &Path, out_pkg: &Path) -> Result<(), String> {
    for d in [src, out_pkg] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let write = |p: PathBuf, text: &str| {
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    write(src.join("prod_assumptions.ml"), ML)?;
    write(src.join("g_prod_assumptions.mlg"), MLG)?;
    write(out_pkg.join("META"), META)?;
    Ok(())
}

/// Compile the sources in `src` (the grammar through `coqpp`, both modules with `ocamlopt`)
/// and link them into the shared plugin `cmxs`.
fn compile_plugin(src: &Path, cmxs: &Path) -> Result<(), String> {
    let opt = |file: &str| {
        run_tool(
            "ocamlfind",
            &[
                "ocamlopt",
                "-package",
                "coq-core.vernac",
                "-rectypes",
                "-thread",
                "-w",
                "-a",
                "-c",
                file,
            ],
            Some(src),
        )
    };
    run_tool("coqpp", &["g_prod_assumptions.mlg"], Some(src))?;
    opt("prod_assumptions.ml")?;
    opt("g_prod_assumptions.ml")?;
    let cmxs_s = cmxs.to_string_lossy().into_owned();
    run_tool(
        "ocamlfind",
        &[
            "ocamlopt",
            "-shared",
            "-o",
            &cmxs_s,
            "prod_assumptions.cmx",
            "g_prod_assumptions.cmx",
        ],
        Some(src),
    )?;
    Ok(())
}
