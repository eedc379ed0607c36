//! A throwaway PostgreSQL server for tests that need a real one.
//!
//! Owns [`PostgresServer`]: finds the server binaries (`pg_config
//! --bindir`, else the newest `/usr/lib/postgresql/*/bin`, else `initdb` on
//! `PATH`), `initdb`s a cluster in a temp dir, starts `postgres` on
//! 127.0.0.1 with a free port and its unix socket in the temp dir, and stops
//! it on drop. As root (which `initdb` refuses), the cluster belongs to the
//! `postgres` user when there is one, else `nobody`, and the server runs as
//! that user. With `KEEL_TEST_POSTGRES_URL` set, that server is used instead.
//! [`PostgresServer::database`] makes a fresh database per test (on such a
//! server, dropped again with the [`PostgresServer`]).
//!
//! Without binaries or a URL, [`PostgresServer::start`] returns `None` after
//! printing why (the test then returns early), except under CI (`CI` set),
//! where it panics: CI must not skip these tests silently.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::in_ci;

/// The environment variable naming an existing server to test against.
pub const POSTGRES_URL_ENV: &str = "KEEL_TEST_POSTGRES_URL";

/// How long a fresh server gets to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The superuser of a throwaway cluster (trust authentication, loopback only).
const SUPERUSER: &str = "keel";

/// A PostgreSQL server for one test.
pub struct PostgresServer {
    /// `postgres://user@host:port` without a database.
    base_url: String,
    /// The throwaway cluster; `None` for a server from `KEEL_TEST_POSTGRES_URL`.
    cluster: Option<Cluster>,
    /// The databases made by [`PostgresServer::database`], dropped with the
    /// server when it is not a throwaway one.
    created: std::sync::Mutex<Vec<String>>,
}

struct Cluster {
    child: Child,
    launch: Launch,
    /// Holds the data dir and socket dir; removed on drop.
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for PostgresServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresServer")
            .field("throwaway", &self.cluster.is_some())
            .finish_non_exhaustive()
    }
}

impl PostgresServer {
    /// A server for this test, or `None` (after saying so) when there is no
    /// PostgreSQL here and this is not CI. Panics when a server cannot be
    /// started, or when none is found under CI.
    pub async fn start() -> Option<Self> {
        if let Ok(url) = std::env::var(POSTGRES_URL_ENV)
            && !url.trim().is_empty()
        {
            return Some(Self {
                base_url: strip_database(url.trim()),
                cluster: None,
                created: std::sync::Mutex::default(),
            });
        }
        let Some(bindir) = find_bindir() else {
            let why = format!(
                "no PostgreSQL server binaries found (looked at `pg_config --bindir`, \
                 /usr/lib/postgresql/*/bin and initdb on PATH) and {POSTGRES_URL_ENV} is not set"
            );
            if in_ci() {
                panic!("{why}: CI must run the PostgreSQL tests; install PostgreSQL");
            }
            eprintln!("SKIPPED: {why}; install PostgreSQL to run this test");
            return None;
        };
        let server = match tokio::task::spawn_blocking(move || Self::start_cluster(&bindir)).await {
            Ok(Ok(server)) => server,
            Ok(Err(e)) => panic!("cannot start a throwaway PostgreSQL server: {e:#}"),
            Err(e) => panic!("starting PostgreSQL failed: {e}"),
        };
        server.wait_until_ready().await;
        Some(server)
    }

    fn start_cluster(bindir: &Path) -> anyhow::Result<Self> {
        // Under /tmp when there is one: a short path (a unix socket's path
        // is limited to about 100 bytes), and reachable by the server's
        // user when that is not us.
        let tmp = Path::new("/tmp");
        let mut builder = tempfile::Builder::new();
        builder.prefix("keel-pg-");
        let dir = if tmp.is_dir() {
            builder.tempdir_in(tmp)
        } else {
            builder.tempdir()
        }
        .context("temp dir for PostgreSQL")?;
        let data = dir.path().join("data");
        let sockets = dir.path().join("sockets");
        std::fs::create_dir(&sockets).context("socket dir")?;
        let owner = run_as_user();
        if let Some(user) = &owner {
            let status = Command::new("chown")
                .arg("-R")
                .arg(format!("{user}:"))
                .arg(dir.path())
                .status()
                .context("run chown")?;
            anyhow::ensure!(status.success(), "chown of the PostgreSQL temp dir failed");
        }
        let output = as_user(owner.as_deref(), &bindir.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "--auth=trust", "--no-sync", "-E", "UTF8"])
            .args(["--locale=C"])
            .output()
            .context("run initdb")?;
        anyhow::ensure!(
            output.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let port = free_port()?;
        let launch = Launch {
            bindir: bindir.to_path_buf(),
            owner,
            data,
            sockets,
            port,
        };
        let child = launch.postmaster(dir.path())?;
        Ok(Self {
            base_url: format!("postgres://{SUPERUSER}@127.0.0.1:{port}"),
            cluster: Some(Cluster {
                child,
                launch,
                _dir: dir,
            }),
            created: std::sync::Mutex::default(),
        })
    }

    /// Crashes the server (an immediate shutdown: no checkpoint, every
    /// session cut, recovery on the next start) and starts it again on the
    /// same files and port. Only for a throwaway server.
    pub async fn crash_and_restart(&mut self) {
        self.crash().await;
        self.restart().await;
    }

    /// Crashes the server (see [`crash_and_restart`](Self::crash_and_restart));
    /// it stays down until [`restart`](Self::restart).
    pub async fn crash(&mut self) {
        let Some(cluster) = &mut self.cluster else {
            panic!("only a throwaway server can be crashed");
        };
        let _ = Command::new("kill")
            .args(["-QUIT", &cluster.child.id().to_string()])
            .status();
        let deadline = Instant::now() + START_TIMEOUT;
        while cluster.child.try_wait().ok().flatten().is_none() {
            assert!(Instant::now() < deadline, "PostgreSQL did not stop");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts a crashed server again on its files and port, and waits
    /// until it takes connections.
    pub async fn restart(&mut self) {
        let Some(cluster) = &mut self.cluster else {
            panic!("only a throwaway server can be restarted");
        };
        cluster.child = match cluster.launch.postmaster(cluster._dir.path()) {
            Ok(child) => child,
            Err(e) => panic!("cannot restart PostgreSQL: {e:#}"),
        };
        self.wait_until_ready().await;
    }

    async fn wait_until_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let url = format!("{}/postgres", self.base_url);
        loop {
            match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                Ok(_) => return,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "PostgreSQL did not accept connections within {START_TIMEOUT:?}: {e}; log: {}",
                        self.log()
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn log(&self) -> String {
        self.cluster
            .as_ref()
            .and_then(|c| std::fs::read_to_string(c._dir.path().join("postgres.log")).ok())
            .unwrap_or_default()
    }

    /// Ends every connection to the database at `url` but this call's own,
    /// as a server restart or a failover would.
    pub async fn drop_connections(url: &str) {
        let (client, connection) = match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            Ok(c) => c,
            Err(e) => panic!("cannot connect to the test PostgreSQL server: {e:?}"),
        };
        let driver = tokio::spawn(connection);
        if let Err(e) = client
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .await
        {
            panic!("cannot end the other connections: {e:?}");
        }
        drop(client);
        let _ = driver.await;
    }

    /// A new, empty database on this server; its `postgres://` URL.
    pub async fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "keel_test_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        let admin = format!("{}/postgres", self.base_url);
        let (client, connection) =
            match tokio_postgres::connect(&admin, tokio_postgres::NoTls).await {
                Ok(c) => c,
                Err(e) => panic!("cannot connect to the test PostgreSQL server: {e:?}"),
            };
        let driver = tokio::spawn(connection);
        if let Err(e) = client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
        {
            panic!("cannot create a test database: {e:?}");
        }
        drop(client);
        let _ = driver.await;
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.clone());
        format!("{}/{name}", self.base_url)
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let Some(cluster) = &mut self.cluster else {
            let names =
                std::mem::take(&mut *self.created.lock().unwrap_or_else(|e| e.into_inner()));
            drop_databases(&self.base_url, names);
            return;
        };
        // SIGINT: fast shutdown (the server ends its sessions and exits).
        let _ = Command::new("kill")
            .args(["-INT", &cluster.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match cluster.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = cluster.child.kill();
                    let _ = cluster.child.wait();
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

/// Drops the test databases made on a server that outlives the test (on a
/// thread of its own: this runs in `Drop`, maybe inside a runtime).
fn drop_databases(base_url: &str, names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    let admin = format!("{base_url}/postgres");
    let dropper = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let Ok((client, connection)) =
                tokio_postgres::connect(&admin, tokio_postgres::NoTls).await
            else {
                return;
            };
            tokio::spawn(connection);
            for name in names {
                let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                if let Err(e) = client.batch_execute(&sql).await {
                    eprintln!("could not drop the test database {name}: {e:?}");
                }
            }
        });
    });
    let _ = dropper.join();
}

/// `postgres://u@h:p/db?x` → `postgres://u@h:p` (queries are dropped too).
fn strip_database(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.trim_end_matches('/').to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let end = rest
        .find(['/', '?'])
        .map_or(url.len(), |i| scheme_end + 3 + i);
    url[..end].to_owned()
}

/// The server binaries' folder.
fn find_bindir() -> Option<PathBuf> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_server(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_server(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|dir| has_server(dir)))
}

/// As root: the user the cluster runs as (`postgres` if it exists, else
/// `nobody`); otherwise `None` (run as ourselves).
fn run_as_user() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return None;
    }
    let has_postgres = Command::new("id")
        .arg("postgres")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    Some(if has_postgres { "postgres" } else { "nobody" }.to_owned())
}

/// `program` run as `user` (with `setpriv`, which execs in place so the
/// child is the program itself), or as ourselves.
fn as_user(user: Option<&str>, program: &Path) -> Command {
    match user {
        None => Command::new(program),
        Some(user) => {
            let mut cmd = Command::new("setpriv");
            cmd.args(["--reuid", user, "--regid", user, "--clear-groups", "--"])
                .arg(program);
            cmd
        }
    }
}

/// How the postmaster of a throwaway cluster is started.
struct Launch {
    bindir: PathBuf,
    owner: Option<String>,
    data: PathBuf,
    sockets: PathBuf,
    port: u16,
}

impl Launch {
    /// Starts the postmaster, its log appended to `dir/postgres.log`.
    fn postmaster(&self, dir: &Path) -> anyhow::Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("postgres.log"))
            .context("log file")?;
        if let Some(user) = &self.owner {
            let _ = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(dir.join("postgres.log"))
                .status();
        }
        as_user(self.owner.as_deref(), &self.bindir.join("postgres"))
            .arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(&self.sockets)
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=50", "-c", "shared_buffers=32MB"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("log file")?)
            .stderr(log)
            .spawn()
            .context("start postgres")
    }
}

/// A port free on 127.0.0.1 right now.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("a free port on 127.0.0.1")?
        .port())
}

#[cfg(test)]
mod tests {
    use super::strip_database;

    #[test]
    fn the_database_is_dropped_from_a_server_url() {
        assert_eq!(
            strip_database("postgres://k@127.0.0.1:5432/keel?sslmode=disable"),
            "postgres://k@127.0.0.1:5432"
        );
        assert_eq!(strip_database("postgres://k@h"), "postgres://k@h");
    }
}
