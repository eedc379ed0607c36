//! MCP servers a workspace names in its own `.keel/config.toml`, started
//! only once the user trusted that file.
//!
//! A repository can carry `.keel/config.toml` with `[mcp_servers]`, so a
//! team shares its servers. Starting them runs programs the repository
//! names, so keel does not start them until the user looked at them and
//! ran `keel mcp trust` in the workspace. That records the file's SHA-256
//! under keel's home (`trusted-workspaces.json`). Any change to the file
//! needs a new `keel mcp trust`. Only `[mcp_servers]` is read from the
//! file. A server of the same name in keel's own `config.toml` wins. It
//! must not start anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::McpServerConfig;
use crate::error::{Error, Result};

/// The workspace's own configuration file.
pub const WORKSPACE_CONFIG: &str = ".keel/config.toml";
/// Where trusted workspace files are recorded, under keel's home.
pub const TRUST_FILE: &str = "trusted-workspaces.json";

/// The `[mcp_servers]` of the workspace file and the file's SHA-256.
pub struct WorkspaceServers {
    pub path: PathBuf,
    pub servers: BTreeMap<String, McpServerConfig>,
    pub sha256: String,
}

/// The workspace's servers, if its file names any.
pub fn read(cwd: &Path) -> Result<Option<WorkspaceServers>> {
    let path = cwd.join(WORKSPACE_CONFIG);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::Config(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let Some(servers) = servers_in(&path, &String::from_utf8_lossy(&bytes))? else {
        return Ok(None);
    };
    let sha256 = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Some(WorkspaceServers {
        path,
        servers,
        sha256,
    }))
}

fn key(cwd: &Path) -> String {
    std::fs::canonicalize(cwd)
        .unwrap_or_else(|_| cwd.to_path_buf())
        .display()
        .to_string()
}

fn trusted(home: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(home.join(TRUST_FILE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Whether the user trusted the workspace file as it is now.
pub fn is_trusted(home: &Path, cwd: &Path, ws: &WorkspaceServers) -> bool {
    trusted(home).get(&key(cwd)) == Some(&ws.sha256)
}

/// Records the workspace file as it is now as trusted.
pub fn trust(home: &Path, cwd: &Path, ws: &WorkspaceServers) -> Result<()> {
    let mut all = trusted(home);
    all.insert(key(cwd), ws.sha256.clone());
    let path = home.join(TRUST_FILE);
    let failed = |e: std::io::Error| Error::Config(format!("cannot write {}: {e}", path.display()));
    std::fs::create_dir_all(home).map_err(failed)?;
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(&all).map_err(|e| Error::Config(e.to_string()))?;
    std::fs::write(&tmp, text).map_err(failed)?;
    std::fs::rename(&tmp, &path).map_err(failed)?;
    Ok(())
}

/// The `[mcp_servers]` of configuration text read from `path` (`None`
/// when it has none).
pub fn servers_in(path: &Path, text: &str) -> Result<Option<BTreeMap<String, McpServerConfig>>> {
    let mut table: toml::Table = toml::from_str(text)
        .map_err(|e| Error::Config(format!("invalid {}: {}", path.display(), e.message())))?;
    let Some(servers) = table.remove("mcp_servers") else {
        return Ok(None);
    };
    servers.try_into().map(Some).map_err(|e: toml::de::Error| {
        Error::Config(format!(
            "{}: [mcp_servers]: {}",
            path.display(),
            e.message()
        ))
    })
}

/// Every server sessions in `cwd` get: `[mcp_servers]` of keel's own
/// `home/config.toml`, plus the workspace's when trusted (what a reload
/// reads again).
pub fn configured(home: &Path, cwd: &Path) -> Result<BTreeMap<String, McpServerConfig>> {
    let path = home.join("config.toml");
    let own = match std::fs::read_to_string(&path) {
        Ok(text) => servers_in(&path, &text)?.unwrap_or_default(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => {
            return Err(Error::Config(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    Ok(servers_for(home, &own, cwd))
}

/// keel's own servers, plus the workspace's when its file is trusted (a
/// name in keel's own configuration wins). An untrusted file is reported
/// and its servers are left out.
pub fn servers_for(
    home: &Path,
    own: &BTreeMap<String, McpServerConfig>,
    cwd: &Path,
) -> BTreeMap<String, McpServerConfig> {
    let mut all = own.clone();
    match read(cwd) {
        Ok(Some(ws)) if is_trusted(home, cwd, &ws) => {
            for (name, mut config) in ws.servers {
                // A repository's servers write only in the workspace
                // unless the file says otherwise.
                if config.command.is_some() {
                    config
                        .sandbox
                        .get_or_insert_with(|| "workspace-write".to_owned());
                    config.cwd.get_or_insert_with(|| cwd.to_path_buf());
                }
                all.entry(name).or_insert(config);
            }
        }
        Ok(Some(ws)) => {
            let names: Vec<&str> = ws.servers.keys().map(String::as_str).collect();
            tracing::warn!(
                "{} names MCP servers ({}) that were not started: review them, then run `keel mcp trust` in the workspace",
                ws.path.display(),
                names.join(", ")
            );
        }
        Ok(None) => {}
        Err(e) => tracing::warn!("{e}"),
    }
    // An HTTP server's tokens from `keel mcp login` are kept under home.
    for (name, config) in &mut all {
        if config.url.is_some() {
            config.credentials = Some(crate::oauth::credentials_path(home, name));
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_file_counts_once_trusted_and_until_it_changes() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".keel")).unwrap();
        let file = ws.path().join(WORKSPACE_CONFIG);
        std::fs::write(&file, "[mcp_servers.team]\ncommand = \"team-mcp\"\n").unwrap();
        let own = BTreeMap::new();
        assert!(servers_for(home.path(), &own, ws.path()).is_empty());
        let read_now = read(ws.path()).unwrap().unwrap();
        trust(home.path(), ws.path(), &read_now).unwrap();
        assert!(servers_for(home.path(), &own, ws.path()).contains_key("team"));
        // A changed file needs trusting again.
        std::fs::write(&file, "[mcp_servers.team]\ncommand = \"other\"\n").unwrap();
        assert!(servers_for(home.path(), &own, ws.path()).is_empty());
        // keel's own server of the same name wins.
        let changed = read(ws.path()).unwrap().unwrap();
        trust(home.path(), ws.path(), &changed).unwrap();
        let mut mine = BTreeMap::new();
        mine.insert(
            "team".to_owned(),
            McpServerConfig {
                command: Some("mine".into()),
                ..McpServerConfig::default()
            },
        );
        let merged = servers_for(home.path(), &mine, ws.path());
        assert_eq!(merged["team"].command.as_deref(), Some("mine"));
    }

    #[test]
    fn configured_reads_keels_own_servers_and_the_trusted_workspaces() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "[mcp_servers.own]\ncommand = \"own-mcp\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.path().join(".keel")).unwrap();
        std::fs::write(
            ws.path().join(WORKSPACE_CONFIG),
            "[mcp_servers.team]\ncommand = \"team-mcp\"\n",
        )
        .unwrap();
        let names = |m: BTreeMap<String, McpServerConfig>| m.into_keys().collect::<Vec<_>>();
        assert_eq!(names(configured(home.path(), ws.path()).unwrap()), ["own"]);
        let file = read(ws.path()).unwrap().unwrap();
        trust(home.path(), ws.path(), &file).unwrap();
        assert_eq!(
            names(configured(home.path(), ws.path()).unwrap()),
            ["own", "team"]
        );
        // The repository's server writes only in the workspace; keel's
        // own is the user's to confine.
        let all = configured(home.path(), ws.path()).unwrap();
        assert_eq!(all["team"].sandbox.as_deref(), Some("workspace-write"));
        assert_eq!(all["team"].cwd.as_deref(), Some(ws.path()));
        assert_eq!(all["own"].sandbox, None);
        std::fs::write(
            home.path().join("config.toml"),
            "[mcp_servers.bad]\ncomand = 1\n",
        )
        .unwrap();
        let e = configured(home.path(), ws.path()).unwrap_err().to_string();
        assert!(e.contains("comand"), "{e}");
    }
}
