//! `keel app-server generate-json-schema` / `generate-ts` write keel's own
//! schema, the same as the copy checked in under
//! `crates/app-server-protocol/schema/` (which the protocol crate's tests
//! regenerate from the Rust types).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::Env;

fn files(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    out
}

#[tokio::test]
async fn generated_schemas_match_the_checked_in_copy() {
    let env = Env::new().await;
    let checked_in =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../app-server-protocol/schema");
    for (sub, dir) in [("generate-json-schema", "json"), ("generate-ts", "ts")] {
        let out = tempfile::tempdir().unwrap();
        let run = env
            .keel()
            .args([
                "app-server",
                sub,
                "--out",
                &out.path().display().to_string(),
            ])
            .run()
            .await
            .unwrap();
        assert_eq!(run.code(), Some(0), "{sub}: {}", run.stderr);
        let written = files(out.path());
        assert!(!written.is_empty());
        assert_eq!(written, files(&checked_in.join(dir)), "{sub}");
    }
    let run = env
        .keel()
        .args(["app-server", "generate-json-schema"])
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(2), "--out is required: {}", run.stderr);
}
