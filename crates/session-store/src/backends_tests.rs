//! The same session behaviour on both homes of session files: a folder on
//! disk and the sessions database (a throwaway PostgreSQL server, see
//! `keel_test_support::PostgresServer`). One scenario function, run once
//! per backend: entries and branches survive a reload, listing and
//! summaries, reopening and continuing, a second writer refused, forks
//! keep ids and parents, id prefixes resolve.

use std::path::Path;

use crate::testutil::{assistant, msg, text_of, user, within};
use crate::{EntryBody, Error, SessionStore, load};

async fn scenario(store: &SessionStore) {
    let cwd = Path::new("/work/proj");
    let other_cwd = Path::new("/work/other_proj");

    // Entries, a branch, a name; a reload sees the active branch.
    let writer = within(store.create(cwd, None)).await.unwrap();
    let a = within(writer.append(msg(user("fix the parser"))))
        .await
        .unwrap();
    let b = within(writer.append(msg(assistant("b")))).await.unwrap();
    within(writer.set_leaf(Some(a.id.clone()))).await.unwrap();
    within(writer.append(msg(assistant("d")))).await.unwrap();
    within(writer.append(EntryBody::SessionInfo {
        name: Some("parser".into()),
    }))
    .await
    .unwrap();
    within(writer.flush()).await.unwrap();
    let path = writer.path().to_path_buf();
    let loaded = within(load(&path)).await.unwrap();
    assert_eq!(loaded.entries.len(), 4);
    assert!(loaded.entry(&b.id).is_some());
    let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
    assert_eq!(texts, ["fix the parser", "d"]);
    assert_eq!(loaded.name().as_deref(), Some("parser"));
    assert!(!loaded.recovered_tail);

    // The writer that still has it open is the only one: a second one,
    // opened from that load, is refused once the first appends.
    let second = within(load(&path)).await.unwrap();
    within(writer.append(msg(user("more")))).await.unwrap();
    within(writer.close()).await.unwrap();
    let err = within(second.into_writer()).await.unwrap_err();
    assert!(matches!(err, Error::Modified { .. }), "{err}");

    // Reopened from a fresh load, it continues where it stopped.
    let loaded = within(load(&path)).await.unwrap();
    assert_eq!(loaded.entries.len(), 5);
    let writer = within(loaded.into_writer()).await.unwrap();
    let e = within(writer.append(msg(assistant("e")))).await.unwrap();
    assert_eq!(
        e.parent_id.as_deref(),
        within(load(&path)).await.unwrap().entries[4]
            .id
            .as_str()
            .into()
    );
    within(writer.close()).await.unwrap();
    assert_eq!(within(load(&path)).await.unwrap().entries.len(), 6);

    // A fork keeps ids, parents and timestamps.
    let source = within(load(&path)).await.unwrap();
    let branch: Vec<_> = source.branch().into_iter().cloned().collect();
    let fork = within(store.create_with(cwd, Some(source.header.id.clone()), branch.clone()))
        .await
        .unwrap();
    within(fork.close()).await.unwrap();
    let forked = within(load(fork.path())).await.unwrap();
    assert_eq!(forked.entries, branch);
    assert_eq!(
        forked.header.parent_session.as_deref(),
        Some(source.header.id.as_str())
    );

    // Another workspace.
    let elsewhere = within(store.create(other_cwd, None)).await.unwrap();
    within(elsewhere.append(msg(user("hello there"))))
        .await
        .unwrap();
    within(elsewhere.close()).await.unwrap();

    // Listing: this workspace's sessions newest first, with summaries.
    let listed = within(store.list(cwd)).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [fork.id(), source.header.id.as_str()]);
    let summary = &listed[1];
    assert_eq!(summary.path, path);
    assert_eq!(summary.message_count, 5);
    assert_eq!(summary.first_message.as_deref(), Some("fix the parser"));
    assert_eq!(summary.name.as_deref(), Some("parser"));
    assert_eq!(summary.cwd, "/work/proj");
    let latest = within(store.latest(cwd)).await.unwrap().unwrap();
    assert_eq!(latest.id, fork.id());
    let all = within(store.list_all()).await.unwrap();
    let mut all_ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
    all_ids.sort_unstable();
    let mut expected = [fork.id(), source.header.id.as_str(), elsewhere.id()];
    expected.sort_unstable();
    assert_eq!(all_ids, expected);

    // Resolving what a user typed: a path, an id, a unique prefix.
    assert_eq!(
        within(store.resolve(cwd, &path.to_string_lossy()))
            .await
            .unwrap(),
        path
    );
    assert_eq!(
        within(store.resolve(cwd, elsewhere.id())).await.unwrap(),
        elsewhere.path()
    );
    let err = within(store.resolve(cwd, "ffffffff-no")).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    // Removing one leaves the others.
    within(store.remove(elsewhere.path())).await.unwrap();
    assert!(within(store.list(other_cwd)).await.unwrap().is_empty());
    assert_eq!(within(store.list_all()).await.unwrap().len(), 2);
    let err = within(store.remove(elsewhere.path())).await.unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
}

/// A home file: absent, written, replaced, appended to, removed.
async fn home_files_scenario(path: &Path) {
    use crate::home_files;
    assert_eq!(home_files::read(path).await.unwrap(), None);
    home_files::write(path, b"{\"a\":1}".to_vec())
        .await
        .unwrap();
    home_files::write(path, b"{\"a\":2}".to_vec())
        .await
        .unwrap();
    assert_eq!(
        home_files::read(path).await.unwrap().as_deref(),
        Some(&b"{\"a\":2}"[..])
    );
    let log = path.with_file_name("gates.jsonl");
    home_files::append(&log, b"one\n".to_vec()).await.unwrap();
    home_files::append(&log, b"two\n".to_vec()).await.unwrap();
    // The blocking form (a sync audit line) lands in the same file, in order.
    home_files::append_blocking(&log, b"three\n").unwrap();
    assert_eq!(
        home_files::read(&log).await.unwrap().as_deref(),
        Some(&b"one\ntwo\nthree\n"[..])
    );
    assert!(home_files::remove(path).await.unwrap());
    assert!(!home_files::remove(path).await.unwrap());
    assert_eq!(home_files::read(path).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn disk_runs_the_session_scenario() {
    let dir = tempfile::tempdir().unwrap();
    scenario(&SessionStore::new(dir.path().join("sessions"))).await;
    home_files_scenario(&dir.path().join("app-server/threads/t1.json")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_runs_the_session_scenario() {
    let Some(server) = keel_test_support::PostgresServer::start().await else {
        return;
    };
    let url = server.database().await;
    // Nothing on disk: the home is a folder that is never created.
    let home = Path::new("/nonexistent-keel-test-root");
    let root = &home.join("sessions");
    crate::use_database(home, &url, "postgres://test")
        .await
        .unwrap();
    assert_eq!(crate::database_in_use(), Some("postgres://test"));
    scenario(&SessionStore::new(root)).await;
    home_files_scenario(&home.join("app-server/threads/t1.json")).await;
    assert!(!home.exists());

    // The file read back is what keel would have written: the same parser
    // loads it, and the bytes are valid JSONL with one header.
    let store = SessionStore::new(root);
    let first = within(store.list_all()).await.unwrap();

    // Rows from before the listing facts were kept in columns: each is
    // summarized from its lines once when listed (the same summaries),
    // and kept from then on.
    let client = crate::pool::connect(&url.parse().unwrap()).await.unwrap();
    let forgotten = client
        .execute(
            "UPDATE keel_session_files SET summarized = false, messages = 0, \
             first_message = NULL, named = false, name = NULL",
            &[],
        )
        .await
        .unwrap();
    assert!(forgotten >= 2, "{forgotten}");
    assert_eq!(within(store.list_all()).await.unwrap(), first);
    let unsummarized: i64 = client
        .query_one(
            "SELECT count(*) FROM keel_session_files WHERE NOT summarized",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unsummarized, 0);
    assert_eq!(within(store.list_all()).await.unwrap(), first);
    let bytes = tokio::task::spawn_blocking({
        let path = first[0].path.clone();
        move || crate::files::read(&path).unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    assert_eq!(text.matches("\"type\":\"session\"").count(), 1);

    // Two writers opened from the same load (two machines continuing one
    // session at once): the first append wins, the second is refused at
    // its flush instead of interleaving, and the session keeps one chain.
    let path = first[0].path.clone();
    let a = within(within(load(&path)).await.unwrap().into_writer())
        .await
        .unwrap();
    let b = within(within(load(&path)).await.unwrap().into_writer())
        .await
        .unwrap();
    let before = within(load(&path)).await.unwrap().entries.len();
    within(a.append(msg(user("from a")))).await.unwrap();
    within(a.flush()).await.unwrap();
    within(b.append(msg(user("from b")))).await.unwrap();
    let err = within(b.flush()).await.unwrap_err();
    assert!(err.to_string().contains("another writer"), "{err}");
    let after = within(load(&path)).await.unwrap();
    assert_eq!(after.entries.len(), before + 1);
    assert_eq!(text_of(&after.messages().pop().unwrap()), "from a");

    // An append that committed but whose answer was lost with its
    // connection is sent again: it counts once. Another writer's stale
    // append is still refused.
    tokio::task::spawn_blocking(move || {
        let (db, key) = crate::db::under(&path).unwrap();
        let len = crate::files::read(&path).unwrap().len() as u64;
        let mut file = db.open_append(&key, len, len).unwrap().unwrap();
        let line = b"{\"type\":\"custom\",\"id\":\"once0001\"}\n";
        file.append(line).unwrap();
        file.before_its_last_append(1).append(line).unwrap();
        let text = String::from_utf8(crate::files::read(&path).unwrap()).unwrap();
        assert_eq!(text.matches("once0001").count(), 1);
        let err = file
            .before_its_last_append(1)
            .append(b"{\"type\":\"custom\",\"id\":\"other001\"}\n")
            .unwrap_err();
        assert!(err.to_string().contains("another writer"), "{err}");
    })
    .await
    .unwrap();
    drop(server);
}
