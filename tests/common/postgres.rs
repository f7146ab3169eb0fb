//! A real PostgreSQL server for the tests that need one: `initdb` into a temp dir, `pg_ctl
//! start` on a free port with its socket in that dir, one per test binary, and one fresh
//! database per test. A watcher process stops the server and removes its files when the test
//! binary exits, however it exits.
//!
//! The server binaries are found in `PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`
//! (Debian's `postgresql` package), else on the PATH. Without them the tests that need
//! PostgreSQL skip with a message, unless `REQUIRE_POSTGRES=1` (CI) makes that a failure.
//! PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The running server of this test binary.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    /// `Some("postgres")` when the tests run as root.
    user: Option<String>,
}

static SERVER: OnceLock<Option<Postgres>> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

/// The server, started on first use; `None` (after a message) where PostgreSQL is not
/// installed and not required.
pub fn server() -> Option<&'static Postgres> {
    SERVER
        .get_or_init(|| match find_bin() {
            Some(bin) => Some(Postgres::start(bin)),
            None if std::env::var("REQUIRE_POSTGRES").is_ok_and(|v| v == "1") => {
                panic!("REQUIRE_POSTGRES=1 but no PostgreSQL server binaries (initdb, pg_ctl) were found; install Debian's `postgresql` or set PG_BIN")
            }
            None => {
                eprintln!("skipped: PostgreSQL is not installed (apt-get install postgresql, or set PG_BIN)");
                None
            }
        })
        .as_ref()
}

/// A URL to a new, empty database on the test server.
pub fn fresh_database() -> Option<String> {
    let server = server()?;
    Some(server.create_database())
}

fn find_bin() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).or_else(|| {
        let out = Command::new("sh")
            .args(["-c", "command -v initdb"])
            .output()
            .ok()?;
        let path = String::from_utf8(out.stdout).ok()?;
        Path::new(path.trim()).parent().map(Path::to_path_buf)
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Postgres {
    fn start(bin: PathBuf) -> Postgres {
        let user = is_root().then(|| "postgres".to_string());
        let dir =
            std::env::temp_dir().join(format!("vsl-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).expect("pg dir");
        if let Some(user) = &user {
            let status = Command::new("chown")
                .args([user.as_str(), dir.to_str().unwrap_or_default()])
                .status()
                .expect("chown");
            assert!(status.success(), "chown {} to {user}", dir.display());
        }
        let port = free_port();
        let server = Postgres {
            dir,
            bin,
            port,
            user,
        };
        let data = server.dir.join("data");
        server.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap_or_default(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        // The server lives while this test binary does: the watcher stops it and removes its
        // files once our process is gone.
        let pg_ctl = server.bin.join("pg_ctl");
        let stop = format!(
            "{} {} -D {} stop -m immediate >/dev/null 2>&1; rm -rf {}",
            server.as_user_prefix(),
            pg_ctl.display(),
            data.display(),
            server.dir.display()
        );
        // Never waited for: it outlives this process by design (it exits after us).
        #[allow(clippy::zombie_processes)]
        let _watcher = Command::new("sh")
            .args([
                "-c",
                &format!(
                    "while kill -0 {} 2>/dev/null; do sleep 1; done; {stop}",
                    std::process::id()
                ),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("watcher");
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=400 \
             -c shared_buffers=64MB -c fsync=off -c full_page_writes=off",
            server.dir.display()
        );
        server.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap_or_default(),
                "-o",
                &options,
                "-l",
                server.dir.join("log").to_str().unwrap_or_default(),
                "-w",
                "start",
            ],
        );
        server
    }

    fn as_user_prefix(&self) -> String {
        match &self.user {
            Some(user) => format!("runuser -u {user} --"),
            None => String::new(),
        }
    }

    /// Runs one of the server's programs (as the `postgres` user when we are root).
    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = match &self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        let out = command.args(args).output().expect(program);
        assert!(
            out.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates a database and returns its URL.
    pub fn create_database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            DATABASES.fetch_add(1, Ordering::SeqCst)
        );
        self.sql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Runs SQL through `psql` on the server's socket; returns what it printed (unaligned,
    /// tuples only).
    pub fn sql(&self, database: &str, sql: &str) -> String {
        let psql = self.bin.join("psql");
        let psql = if psql.exists() {
            psql
        } else {
            PathBuf::from("psql")
        };
        let out = Command::new(psql)
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                sql,
            ])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql `{sql}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// The store a test runs on in process: sled in `dir`, or with `TEST_STORE=postgres` a fresh
/// database of the test server (CI runs both).
pub fn test_store(dir: &Path) -> std::sync::Arc<dyn vshortlink::store::Store> {
    #[cfg(feature = "postgres")]
    if std::env::var("TEST_STORE").as_deref() == Ok("postgres") {
        let url = fresh_database().expect("TEST_STORE=postgres needs PostgreSQL");
        return std::sync::Arc::new(
            vshortlink::store::postgres::PgStore::open(&vshortlink::store::postgres::PgOptions {
                url,
                pool_size: 4,
            })
            .expect("open postgres"),
        );
    }
    vshortlink::store::sled::SledStore::open(&vshortlink::store::sled::StoreOptions::new(dir))
        .expect("open sled")
}
