//! The sandbox every Coq process runs in: bubblewrap (no network, no other processes, the file
//! system read-only except a private `/tmp` and work directory) plus an address-space limit.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

use crate::bugs::ProverRelease;

use crate::config::CoqCheckConfig;

/// `PATH` inside the sandbox; CoqHammer needs `/usr/libexec/coq-hammer` (`htimeout`, `predict`).
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/libexec/coq-hammer";

/// Read-only binds when they exist on this machine (`/etc/ocamlfind.conf` is needed by Coq's
/// plugin loader, `/etc/alternatives` by Debian's program links).
const RO_BINDS: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ocamlfind.conf",
    "/etc/alternatives",
    "/etc/findlib.conf",
];

/// A command running `program args…` sandboxed according to `cfg`, with `work` (if given)
/// mounted read-write as `/work` and used as the working directory.
pub fn command(
    cfg: &CoqCheckConfig,
    program: &Path,
    args: &[&str],
    work: Option<&Path>,
) -> Command {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!(
        "--as={}",
        cfg.memory_limit_mb.saturating_mul(1024 * 1024)
    ))
    .arg("--");
    if cfg.sandbox {
        cmd.arg("bwrap");
        bind_system(&mut cmd, cfg);
        bind_private(&mut cmd, cfg, work);
        isolate(&mut cmd, cfg);
        cmd.arg("--");
        cmd.arg(program);
    } else {
        cmd.arg(program);
        run_unsandboxed(&mut cmd, work);
    }
    cmd.args(args);
    cmd
}

/// Read-only binds of the system (or the prover root's stand-ins) and plugin: all it may read.
fn bind_system(cmd: &mut Command, cfg: &CoqCheckConfig) {
    for p in RO_BINDS {
        // With a prover root, its files stand in for the host's at the same paths.
        let source = match &cfg.root {
            Some(root) => root.join(p.trim_start_matches('/')),
            None => Path::new(p).to_path_buf(),
        };
        if source.exists() {
            cmd.arg("--ro-bind").arg(&source).arg(p);
        }
    }
    if let Some(plugin) = &cfg.plugin {
        for d in plugin.ro_binds() {
            cmd.arg("--ro-bind").arg(&d).arg(&d);
        }
    }
}

/// Private mounts (`/proc`, `/dev`, `/tmp`, `/work`: the only places it may write), then the
/// load paths' libraries, read-only.
fn bind_private(cmd: &mut Command, cfg: &CoqCheckConfig, work: Option<&Path>) {
    cmd.args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    match work {
        Some(dir) => {
            cmd.arg("--bind").arg(dir).arg("/work");
        }
        None => {
            cmd.args(["--dir", "/work"]);
        }
    }
    // After `/tmp` and `/work`, so that a library kept below either is not hidden.
    for (i, lp) in cfg.load_paths.iter().enumerate() {
        cmd.arg("--ro-bind").arg(&lp.dir).arg(library_mount(i));
    }
}

/// Unshare every namespace and replace the environment: nothing of the host reaches Coq.
fn isolate(cmd: &mut Command, cfg: &CoqCheckConfig) {
    cmd.args([
        "--chdir",
        "/work",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]);
    cmd.args([
        "--setenv",
        "PATH",
        SANDBOX_PATH,
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "TMPDIR",
        "/tmp",
    ]);
    if cfg.root.is_some() {
        // OCaml 5 (Rocq 9) reserves address space for the minor heaps of every possible
        // domain, more than the `--as` limit allows; Coq runs on one domain.
        cmd.args(["--setenv", "OCAMLRUNPARAM", "d=1"]);
    }
}

/// Without the sandbox: CoqHammer's helpers on `PATH` and `work` as the working directory.
fn run_unsandboxed(cmd: &mut Command, work: Option<&Path>) {
    cmd.env(
        "PATH",
        format!(
            "{}:{}",
            std::env::var("PATH").unwrap_or_default(),
            "/usr/libexec/coq-hammer"
        ),
    );
    if let Some(dir) = work {
        cmd.current_dir(dir);
    }
}

/// Where the sandbox mounts the `i`-th load-path binding's directory.
fn library_mount(i: usize) -> String {
    format!("/prod-lib/{i}")
}

/// The `-Q dir Root` arguments of every load-path binding of `cfg`, with `dir` as the Coq
/// process sees it (the sandbox's mount, or the directory itself without the sandbox).
pub fn load_path_args(cfg: &CoqCheckConfig) -> Vec<String> {
    let mut out = vec![];
    for (i, lp) in cfg.load_paths.iter().enumerate() {
        let dir = if cfg.sandbox {
            library_mount(i)
        } else {
            lp.dir.to_string_lossy().into_owned()
        };
        out.extend(["-Q".to_string(), dir, lp.logical.clone()]);
    }
    out
}

/// The standard output of a Coq tool run as the checker runs it (sandboxed, with the prover
/// root when there is one): `coqc --version`, `coqc -where`.
pub fn tool_output(cfg: &CoqCheckConfig, program: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = command(cfg, program, args, None);
    cmd.stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed ({})",
            program.display(),
            args.join(" "),
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The prover's library directory (`coqc -where`, run as the checker runs Coq) as a path on
/// this machine (under the prover root, if any).
pub fn coqlib(cfg: &CoqCheckConfig) -> Result<std::path::PathBuf, String> {
    tool_output(cfg, &cfg.coqc, &["-where"]).map(|inside| host_path(cfg, &inside))
}

/// Is `program` on the `PATH` the checker's Coq runs with (the sandbox's, under the prover
/// root when there is one; else this process's and CoqHammer's helpers)?
pub fn can_run(cfg: &CoqCheckConfig, program: &str) -> bool {
    let dirs: Vec<std::path::PathBuf> = if cfg.sandbox {
        SANDBOX_PATH.split(':').map(|d| host_path(cfg, d)).collect()
    } else {
        let path = std::env::var("PATH").unwrap_or_default();
        path.split(':')
            .chain(["/usr/libexec/coq-hammer"])
            .filter(|d| !d.is_empty())
            .map(std::path::PathBuf::from)
            .collect()
    };
    dirs.iter().any(|d| d.join(program).is_file())
}

/// Where a path inside the sandbox lies on the host (under the prover root, if any).
pub fn host_path(cfg: &CoqCheckConfig, inside: &str) -> std::path::PathBuf {
    match &cfg.root {
        Some(root) => root.join(inside.trim_start_matches('/')),
        None => std::path::PathBuf::from(inside),
    }
}

/// The prover release `cfg` runs (`coqc --version` as the checker runs Coq; `None`: a release
/// the bug table does not know, which gets every rule), asked once per process and prover.
pub fn prover_release(cfg: &CoqCheckConfig) -> Option<ProverRelease> {
    type Memo = Vec<(
        (std::path::PathBuf, Option<std::path::PathBuf>),
        Option<ProverRelease>,
    )>;
    static KNOWN: Mutex<Memo> = Mutex::new(vec![]);
    let key = (cfg.coqc.clone(), cfg.root.clone());
    let mut memo = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = memo.iter().find(|(k, _)| *k == key) {
        return *r;
    }
    let r = crate::sandbox::tool_output(cfg, &cfg.coqc, &["--version"])
        .ok()
        .and_then(|v| ProverRelease::from_fingerprint(&v));
    memo.push((key, r));
    r
}

type SpawnJob = (Command, Sender<std::io::Result<Child>>);

/// Spawn `cmd` from a thread that lives as long as the process.
///
/// bubblewrap's `--die-with-parent` uses `PR_SET_PDEATHSIG`, which fires when the *thread* that
/// forked the sandbox exits, not the process. Workers outlive the short-lived threads that
/// check a batch, so every long-lived sandbox is forked here.
pub fn spawn_persistent(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<Sender<SpawnJob>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<SpawnJob>();
        let _ = std::thread::Builder::new()
            .name("coq-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            });
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = channel();
    let sent = spawner
        .lock()
        .map_err(|_| std::io::Error::other("spawner lock poisoned"))?
        .send((cmd, reply_tx));
    if sent.is_err() {
        return Err(std::io::Error::other("spawner thread is gone"));
    }
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("spawner thread is gone"))?
}
