//! A throw-away PostgreSQL cluster for tests (feature `test-cluster`): started from the Debian
//! package's binaries in a temporary directory, listening on a Unix socket only, stopped on
//! drop. One place for every crate whose tests need a real server.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn pg_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").is_file() && p.join("pg_ctl").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// A PostgreSQL cluster in a temporary directory, listening on a Unix socket only.
pub struct Pg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    root: bool,
}

impl Pg {
    fn as_owner(&self, program: &Path) -> Command {
        if self.root {
            // PostgreSQL refuses to run as root: the Debian package's `postgres` user runs it.
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    /// `None` (after printing why; the caller skips its test) where PostgreSQL is not
    /// installed. Under `CI=true`, where `scripts/test.sh` installs it, its absence panics.
    pub fn start() -> Option<Pg> {
        let Some(bin) = pg_bin() else {
            prod_test_support::require(
                false,
                "PostgreSQL is not installed (Debian package `postgresql`)",
            );
            return None;
        };
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout.trim_ascii() == b"0")
            .unwrap_or(false);
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Pg {
            dir,
            bin,
            port,
            root,
        };
        if root {
            let ok = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(pg.dir.path())
                .status()
                .unwrap();
            assert!(ok.success(), "chown to postgres");
        }
        let data = pg.dir.path().join("data");
        let st = pg
            .as_owner(&pg.bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "prod", "--no-sync"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "initdb");
        let opts = format!(
            "-c listen_addresses='' -k {} -p {} -c fsync=off",
            pg.dir.path().display(),
            port
        );
        let st = pg
            .as_owner(&pg.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .args(["-w", "-l"])
            .arg(pg.dir.path().join("log"))
            .args(["-o", &opts, "start"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "pg_ctl start");
        Some(pg)
    }

    /// A libpq connection string for the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!(
            "host={} port={} user=prod dbname=postgres",
            self.dir.path().display(),
            self.port
        )
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = self
            .as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .status();
    }
}
