//! The final verdict for a whole tree: the assembled proof is compiled cold by `coqc` in a
//! fresh sandbox, and the kernel decides about the root's own statement, whatever else the
//! file contains:
//!
//! * the root's statement is stated first, in the bare context, under a fresh name (the
//!   *anchor*, admitted), before any lemma of the tree; after the root's proof, a checker's
//!   definition `prod_root_same_… : <anchor's type> := @root` is compiled, so the root's
//!   kernel type must be convertible with what its statement means in its own context (a
//!   lemma named like an identifier of the statement changes nothing but the verdict);
//! * `Print Assumptions` of the root may show only axioms the [`AxiomPolicy`] trusts;
//! * the compiled file, the comparison included, is re-checked by Coq's independent kernel
//!   checker `coqchk` (a second implementation of the kernel, so a bug in coqc's
//!   elaboration-time shortcuts cannot pass alone).
//!
//! A failure is an infrastructure failure only from what the checker itself knows (the
//! process did not start, was killed by a signal, or used the address space it is given);
//! what the file prints never decides it.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use prod_check::Verdict;
use rand::Rng;

use crate::assumptions::{parse_assumptions, Assumptions, AxiomPolicy};
use crate::config::CoqCheckConfig;
use crate::protocol::error_message;
use crate::sandbox;

pub use crate::assumptions::FILE_MODULE;

/// What goes into the complete file of an assembled proof.
pub struct AssembledFile<'a> {
    /// The theorem's full context (imports included); it may end inside Sections/Modules.
    pub context: &'a str,
    /// The enclosing Sections/Modules the context leaves open, outermost first.
    pub scope: &'a [String],
    /// The theorem's qualified name (`M.name` when it sits in module `M`).
    pub qualified_name: &'a str,
    /// The root's own statement (`Lemma name binders : type.`), as its theorem states it.
    pub root_statement: &'a str,
    /// The assembled lemmas and root ([`prod_core::AssembledProof::text`]).
    pub assembled: &'a str,
    /// The root's name in `assembled`.
    pub root: &'a str,
    /// Some node's `hammer.` steps were replaced by the tactics its check found.
    pub hammer_replaced: bool,
}

/// A complete file in three parts: the head (CoqHammer's tactic library when needed, the
/// context, [`crate::AFTER_CONTEXT`]), the body (what the context did not have: the root's
/// anchor, the lemmas, the root, the kernel's comparison) and the tail (the `End`s of the open
/// scopes and an alias of the root). The final check puts its term audit between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedFile {
    head: String,
    body: String,
    tail: String,
    /// The name whose assumptions are checked (the root, or its alias after the `End`s).
    pub checked_name: String,
}

impl RenderedFile {
    /// A file from its context (imports included) and body, with nothing after the body:
    /// `checked_name` is a constant the body defines.
    pub fn from_parts(context: &str, body: &str, checked_name: &str) -> Self {
        RenderedFile {
            head: format!("{context}\n{}\n", crate::AFTER_CONTEXT),
            body: body.to_string(),
            tail: String::new(),
            checked_name: checked_name.to_string(),
        }
    }

    /// The complete file as people read it: it compiles by itself with `coqc`.
    pub fn text(&self) -> String {
        format!("{}{}{}", self.head, self.body, self.tail)
    }

    /// The file as the final check compiles it: the ProD plugin declared first, the term
    /// audit's mark after the context (the trusted base) and `ProdAuditAll` after the body,
    /// before any `End` (closing a section re-declares its constants, context ones included).
    fn audited(&self, audit: &Audit) -> String {
        format!(
            "{}\n{}{}\n{}ProdAuditAll \"{}\" \"{}\".\n{}",
            crate::plugin::DECLARE_SENTENCE,
            self.head,
            crate::plugin::MARK_SENTENCE,
            self.body,
            audit.nonce,
            audit.constructs,
            self.tail
        )
    }
}

/// One run of the term audit: its unguessable nonce and the constructs it refuses.
struct Audit {
    nonce: String,
    constructs: String,
}

impl Audit {
    /// Did Coq's output say, with this nonce, that the audit passed?
    fn passed(&self, output: &str) -> bool {
        let ok = format!("ProdAudit {} ok", self.nonce);
        output.lines().any(|l| l.trim() == ok)
    }

    /// The audit's refusal in Coq's output, if it refused.
    fn refusal(&self, output: &str) -> Option<String> {
        let marker = format!("ProdAudit {} refused: ", self.nonce);
        let at = output.find(&marker)? + marker.len();
        Some(error_message(&output[at..]))
    }
}

impl AssembledFile<'_> {
    /// The file for [`final_check`]: CoqHammer's tactic library first when a proof uses its
    /// tactics (replaced `hammer.` steps, or written out; the checker loads it before the
    /// context too), the context, [`crate::AFTER_CONTEXT`], the root's anchor (its statement,
    /// admitted under a fresh name), the assembled text, the kernel's comparison of the root
    /// with its anchor, the `End`s of the open scopes; after `End M` the root is `M.name`, so a
    /// plain alias is defined for the assumption check. `Err` when the root's statement does
    /// not parse.
    pub fn render(&self) -> Result<RenderedFile, String> {
        let tag = format!("{:016x}", rand::thread_rng().gen::<u64>());
        let anchor = format!("prod_root_anchor_{tag}");
        let anchor_sentence = prod_coq::parse_statement(self.root_statement)
            .map_err(|e| format!("the root's statement: {e}"))?
            .renamed(&anchor)
            .to_sentence();
        let needs_hammer = self.hammer_replaced || uses_hammer_tactics(self.assembled);
        let mut head = if needs_hammer {
            format!("{}\n", crate::HAMMER_TACTICS_IMPORT)
        } else {
            String::new()
        };
        head.push_str(&format!("{}\n{}\n", self.context, crate::AFTER_CONTEXT));
        let mut body = format!("{anchor_sentence}\nAdmitted.\n{}", self.assembled);
        body.push_str(&format!(
            "\nDefinition prod_root_same_{tag} : ltac:(let t := type of @{anchor} in exact t) := @{}.\n",
            self.root
        ));
        let mut tail = String::new();
        for sc in self.scope.iter().rev() {
            tail.push_str(&format!("End {sc}.\n"));
        }
        let checked_name = match self.qualified_name.rsplit_once('.') {
            Some((module, _)) => {
                tail.push_str(&format!(
                    "Definition prod_checked_root := @{module}.{}.\n",
                    self.root
                ));
                "prod_checked_root".to_string()
            }
            None => self.root.to_string(),
        };
        Ok(RenderedFile {
            head,
            body,
            tail,
            checked_name,
        })
    }
}

/// Does `text` call one of CoqHammer's tactics (then the file needs its tactic library)?
pub fn uses_hammer_tactics(text: &str) -> bool {
    prod_coq::identifiers(text).into_iter().any(|r| {
        text.get(r)
            .is_some_and(|id| prod_coq::COQHAMMER_TACTICS.contains(&id))
    })
}

/// Compile `file` (imports, context, lemmas child-first, the root, as
/// [`AssembledFile::render`] writes it) with the term audit, and check that its checked name
/// relies on no axiom beyond what the [`AxiomPolicy`] of `cfg` trusts (the same policy as
/// every local check: nothing a node's check reported is taken on trust). `timeout` bounds the
/// whole compilation.
pub fn final_check(file: &RenderedFile, cfg: &CoqCheckConfig, timeout: Duration) -> Verdict {
    let root = file.checked_name.as_str();
    if !prod_coq::is_identifier(root) {
        return Verdict::rejected(format!("root name `{root}` is not an identifier"));
    }
    let plain = file.text();
    if plain.contains('\0') {
        return Verdict::rejected("file contains a NUL byte");
    }
    let cfg = match crate::plugin::for_config(cfg) {
        Ok(p) => CoqCheckConfig {
            plugin: Some(p),
            ..cfg.clone()
        },
        Err(e) => return Verdict::infra(e),
    };
    let cfg = &cfg;
    let release = crate::sandbox::prover_release(cfg);
    let audit = Audit {
        nonce: format!("{:016x}", rand::thread_rng().gen::<u64>()),
        constructs: crate::bugs::RuleSet::for_release(release).term_audit(),
    };
    let start = Instant::now();
    let marks = Sentinels::new();
    // Our own closing lines: the proof text ran before them, so it cannot print after `a`.
    let text = format!(
        "{}\n\nLocate {}.\nPrint Assumptions {root}.\nLocate {}.\n",
        file.audited(&audit),
        marks.name("a"),
        marks.name("b")
    );
    let output = match compile(&text, cfg, timeout, cfg.final_coqchk) {
        Ok(o) => o,
        Err(Verdict::Failed { message, .. }) if audit.refusal(&message).is_some() => {
            return Verdict::rejected(format!(
                "term audit: {}",
                audit.refusal(&message).unwrap_or_default()
            ))
        }
        Err(v) => return v,
    };
    if !audit.passed(&output) {
        return Verdict::Failed {
            step: 1,
            message: "the term audit did not report".into(),
        };
    }
    let axioms = match root_axioms(&output, &marks) {
        Ok(axioms) => axioms,
        Err(v) => return v,
    };
    if !axioms.is_empty() {
        if let Err(v) = check_axiom_origins(&text, &axioms, &marks, cfg, timeout) {
            return v;
        }
    }
    Verdict::Proved {
        axioms,
        replacements: vec![],
        time: start.elapsed(),
        universe_constraints: vec![],
    }
}

/// The names of the `Locate` queries that mark regions of Coq's output, with a fresh
/// unguessable nonce so that the proof text cannot forge them.
struct Sentinels {
    nonce: String,
}

impl Sentinels {
    /// Fresh sentinels for one check.
    fn new() -> Self {
        Sentinels {
            nonce: format!("{:016x}", rand::thread_rng().gen::<u64>()),
        }
    }

    /// The sentinel's name for `tag` (no object has it, so `Locate` says so).
    fn name(&self, tag: &str) -> String {
        format!("S{}{tag}", self.nonce)
    }

    /// Coq's answer to `Locate` of the sentinel for `tag`.
    fn answer(&self, tag: &str) -> String {
        format!("No object of basename {}\n", self.name(tag))
    }
}

/// The axioms the closing `Print Assumptions` lists (between the sentinels `a` and `b`);
/// `Err` with the verdict when it did not run or shows an unsafe or unknown assumption.
fn root_axioms(output: &str, marks: &Sentinels) -> Result<Vec<String>, Verdict> {
    let Some(region) = between(output, &marks.answer("a"), &marks.answer("b")) else {
        return Err(Verdict::Failed {
            step: 1,
            message: "the closing Print Assumptions did not run".into(),
        });
    };
    match parse_assumptions(region) {
        Ok(Assumptions::Closed) => Ok(vec![]),
        Ok(Assumptions::Axioms { axioms, .. }) => Ok(axioms),
        Err(e) => Err(Verdict::Failed {
            step: 1,
            message: format!("unsafe or unknown assumption: {e}"),
        }),
    }
}

/// Compile `text` again with a `Locate` of each axiom, and check that each one's qualified
/// name (where it lives in the compiled file's state) is one the [`AxiomPolicy`] trusts;
/// `Err` with the verdict otherwise.
fn check_axiom_origins(
    text: &str,
    axioms: &[String],
    marks: &Sentinels,
    cfg: &CoqCheckConfig,
    timeout: Duration,
) -> Result<(), Verdict> {
    let policy = AxiomPolicy::new(cfg);
    // Where each axiom lives, by its qualified name in the compiled file's state.
    let mut text2 = text.to_string();
    for (i, ax) in axioms.iter().enumerate() {
        text2.push_str(&format!(
            "Locate {}.\nLocate {ax}.\n",
            marks.name(&format!("q{i}"))
        ));
    }
    text2.push_str(&format!("Locate {}.\n", marks.name("end")));
    let out2 = compile(&text2, cfg, timeout, false)?;
    for (i, ax) in axioms.iter().enumerate() {
        let next = if i + 1 < axioms.len() {
            marks.answer(&format!("q{}", i + 1))
        } else {
            marks.answer("end")
        };
        let located = between(&out2, &marks.answer(&format!("q{i}")), &next)
            .map(|r| r.split_whitespace().collect::<Vec<_>>())
            .and_then(|w| {
                (w.first() == Some(&"Constant")).then(|| w.get(1).map(|q| q.to_string()))?
            });
        match located {
            Some(q) if policy.trusts(&q) => {}
            Some(q) => {
                return Err(Verdict::Failed {
                    step: 1,
                    message: format!("the root relies on `{ax}` ({q}), which is not an axiom of the prover's library or of `allowed_axioms`"),
                })
            }
            None => return Err(Verdict::Failed { step: 1, message: format!("cannot locate assumption `{ax}`") }),
        }
    }
    Ok(())
}

/// The text strictly between the first `a` and the last `b` after it.
fn between<'a>(hay: &'a str, a: &str, b: &str) -> Option<&'a str> {
    let i = hay.find(a)? + a.len();
    let j = hay[i..].rfind(b.trim_end())? + i;
    Some(&hay[i..j])
}

/// Compile `text` as `ProdAssembled.v` with `coqc` in a fresh sandbox (then, if `coqchk`,
/// re-check the `.vo` with `coqchk -norec`); `Ok(output)` when it compiled, else the verdict.
fn compile(
    text: &str,
    cfg: &CoqCheckConfig,
    timeout: Duration,
    coqchk: bool,
) -> Result<String, Verdict> {
    let start = Instant::now();
    let dir = tempfile::tempdir().map_err(|e| Verdict::infra(format!("temp dir: {e}")))?;
    let file = dir.path().join(format!("{FILE_MODULE}.v"));
    std::fs::write(&file, text)
        .map_err(|e| Verdict::infra(format!("write {}: {e}", file.display())))?;
    let coqc = cfg.coqc.to_string_lossy().into_owned();
    let file_arg = format!("{FILE_MODULE}.v");
    // The same library bindings as the workers: the file's imports load the same `.vo`s.
    let load_paths = sandbox::load_path_args(cfg);
    let plugin_args = cfg
        .plugin
        .as_ref()
        .map(|p| p.coqtop_args())
        .unwrap_or_default();
    let mut argv = vec![coqc.as_str(), "-q"];
    argv.extend_from_slice(crate::config::PROVER_FLAGS);
    argv.extend(plugin_args.iter().map(String::as_str));
    argv.extend(load_paths.iter().map(String::as_str));
    argv.push(&file_arg);
    let output = run_sandboxed(cfg, dir.path(), &argv, start, timeout)?;
    if coqchk {
        let chk = cfg.coqchk.to_string_lossy().into_owned();
        let mut chk_argv = vec![chk.as_str(), "-silent"];
        chk_argv.extend(load_paths.iter().map(String::as_str));
        chk_argv.extend(["-norec", FILE_MODULE]);
        run_sandboxed(cfg, dir.path(), &chk_argv, start, timeout).map_err(|v| match v {
            Verdict::Failed { step, message } => Verdict::Failed {
                step,
                message: format!("coqchk rejected the compiled file: {message}"),
            },
            other => other,
        })?;
    }
    Ok(output)
}

/// Run `argv` (a Coq tool) in `dir` under the sandbox; `Ok(output)` on exit 0, else the verdict
/// (`TimedOut` past the overall `timeout` counted from `start`).
fn run_sandboxed(
    cfg: &CoqCheckConfig,
    dir: &std::path::Path,
    argv: &[&str],
    start: Instant,
    timeout: Duration,
) -> Result<String, Verdict> {
    let (mut child, reader) = spawn_tool(cfg, dir, argv)?;
    let (status, peak_mb) = wait_for_tool(&mut child, argv, start, timeout)?;
    let output = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let Some(status) = status else {
        return Err(Verdict::TimedOut { step: 0 });
    };
    tool_verdict(cfg, argv, status, peak_mb, output)
}

/// Start `argv` sandboxed (stderr into stdout) and a reader of its output, so it never blocks.
fn spawn_tool(
    cfg: &CoqCheckConfig,
    dir: &std::path::Path,
    argv: &[&str],
) -> Result<(std::process::Child, std::thread::JoinHandle<Vec<u8>>), Verdict> {
    let mut args = vec!["-c", "exec \"$0\" \"$@\" 2>&1"];
    args.extend_from_slice(argv);
    let mut cmd = sandbox::command(cfg, std::path::Path::new("/bin/sh"), &args, Some(dir));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| Verdict::infra(format!("cannot start {}: {e}", argv[0])))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| Verdict::infra("no output pipe"))?;
    let reader = std::thread::spawn(move || {
        let mut buf = vec![];
        let _ = stdout.by_ref().take(64 * 1024 * 1024).read_to_end(&mut buf);
        buf
    });
    Ok((child, reader))
}

/// Wait for the tool (status `None`: killed past `timeout`), sampling its peak memory in MiB.
fn wait_for_tool(
    child: &mut std::process::Child,
    argv: &[&str],
    start: Instant,
    timeout: Duration,
) -> Result<(Option<std::process::ExitStatus>, Option<u64>), Verdict> {
    // The tool's peak address space, sampled while it runs (the checker's own memory
    // accounting: a failure is "out of memory" only if the tool really used its limit).
    let mut peak_mb: Option<u64> = None;
    let mut polls = 0u32;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => {
                polls += 1;
                if polls.is_multiple_of(10) {
                    let root = child.id() as i32;
                    for (pid, _) in crate::worker::descendants(root) {
                        let p = crate::worker::vm_peak_mb(pid);
                        peak_mb = peak_mb.max(p);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(Verdict::infra(format!("waiting for {}: {e}", argv[0]))),
        }
    };
    Ok((status, peak_mb))
}

/// `Ok(output)` on success, else the verdict: infrastructure only from what the checker knows.
fn tool_verdict(
    cfg: &CoqCheckConfig,
    argv: &[&str],
    status: std::process::ExitStatus,
    peak_mb: Option<u64>,
    output: String,
) -> Result<String, Verdict> {
    if status.success() {
        return Ok(output);
    }
    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return Err(Verdict::infra(format!(
            "{} was killed by signal {sig}: {}",
            argv[0],
            output.chars().take(300).collect::<String>()
        )));
    }
    if crate::protocol::is_out_of_memory(&output)
        && crate::worker::near_memory_limit(peak_mb, cfg.memory_limit_mb)
    {
        return Err(Verdict::infra(format!("{} ran out of memory", argv[0])));
    }
    // Coq reports every refusal with an `Error`, and text a proof prints can only add
    // words, never remove Coq's: a failure without one is the sandbox or the tool itself.
    if !output.contains("Error") {
        return Err(Verdict::infra(format!(
            "{} died ({status}): {}",
            argv[0],
            output.chars().take(300).collect::<String>()
        )));
    }
    Err(Verdict::Failed {
        step: 0,
        message: error_message(&output),
    })
}
