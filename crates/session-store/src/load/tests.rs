//! Tests of loading: every entry type, crash tails, corrupt lines, big
//! files read in chunks, resuming into a tree.

use super::*;
use crate::format::FORMAT_VERSION;
use crate::testutil::{assistant, msg, temp_store, text_of, tool_result, user, within};
use std::fs;

/// Writes a session file by hand: a header and the given lines.
fn write_raw(path: &Path, lines: &[&str], terminator: &str) {
    let mut text = String::from(
        r#"{"type":"session","version":1,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    text.push_str(terminator);
    for line in lines {
        text.push_str(line);
        text.push_str(terminator);
    }
    fs::write(path, text).unwrap();
}

fn raw_entry(id: &str, parent: Option<&str>, text: &str) -> String {
    let entry = Entry {
        id: id.into(),
        parent_id: parent.map(str::to_owned),
        timestamp: "2025-01-01T00:00:01.000Z".into(),
        body: msg(user(text)),
    };
    serde_json::to_string(&entry).unwrap()
}

#[tokio::test]
async fn every_entry_type_round_trips_through_a_file() {
    let (_dir, store, cwd) = temp_store();
    let writer = within(store.create(&cwd, Some("parent-id".into())))
        .await
        .unwrap();
    let bodies = vec![
        msg(user("hello")),
        EntryBody::ModelChange {
            provider: "openai".into(),
            model_id: "gpt-4.1".into(),
        },
        EntryBody::ThinkingLevelChange {
            thinking_level: ThinkingLevel::High,
        },
        msg(assistant("hi there")),
        msg(tool_result("file.txt")),
        EntryBody::SessionInfo {
            name: Some("first".into()),
        },
        EntryBody::SessionInfo {
            name: Some("renamed".into()),
        },
    ];
    let mut written = Vec::new();
    for body in bodies {
        written.push(within(writer.append(body)).await.unwrap());
    }
    within(writer.close()).await.unwrap();

    let loaded = within(load(writer.path())).await.unwrap();
    assert_eq!(loaded.header.id, writer.id());
    assert_eq!(loaded.header.version, FORMAT_VERSION);
    assert_eq!(loaded.header.parent_session.as_deref(), Some("parent-id"));
    assert_eq!(loaded.header.cwd, cwd.to_string_lossy());
    assert!(!loaded.recovered_tail);
    assert_eq!(loaded.entries, written);
    assert_eq!(loaded.leaf_id, written.last().map(|e| e.id.clone()));
    assert_eq!(written[0].parent_id, None);
    for pair in written.windows(2) {
        assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
    }
    let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
    assert_eq!(texts, ["hello", "hi there", "file.txt"]);
    assert_eq!(loaded.name().as_deref(), Some("renamed"));
    assert_eq!(
        loaded.last_model(),
        Some(("openai".to_owned(), "gpt-4.1".to_owned()))
    );
    assert_eq!(loaded.last_thinking_level(), Some(ThinkingLevel::High));
    assert_eq!(loaded.entry(&written[1].id), Some(&written[1]));
}

#[tokio::test]
async fn a_compacted_branch_loads_as_summary_and_kept_messages_and_forks() {
    let (_dir, store, cwd) = temp_store();
    let writer = within(store.create(&cwd, None)).await.unwrap();
    within(writer.append(msg(user("old question"))))
        .await
        .unwrap();
    within(writer.append(msg(assistant("old answer"))))
        .await
        .unwrap();
    let kept = within(writer.append(msg(user("recent question"))))
        .await
        .unwrap();
    within(writer.append(EntryBody::Compaction {
        summary: "## Goal\nanswer questions".into(),
        first_kept_entry_id: kept.id.clone(),
        tokens_before: 900,
        tokens_after: Some(120),
        details: None,
    }))
    .await
    .unwrap();
    within(writer.append(msg(assistant("recent answer"))))
        .await
        .unwrap();
    within(writer.close()).await.unwrap();

    let loaded = within(load(writer.path())).await.unwrap();
    let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
    assert_eq!(texts.len(), 3);
    assert!(texts[0].contains("answer questions"), "{texts:?}");
    assert_eq!(texts[1..], ["recent question", "recent answer"]);
    assert_eq!(loaded.all_messages().len(), 4);

    // A fork copies the branch (ids kept) into a new file that records
    // its parent.
    let branch: Vec<Entry> = loaded.branch().into_iter().cloned().collect();
    let fork = within(store.create_with(
        &cwd,
        Some(loaded.path.display().to_string()),
        branch.clone(),
    ))
    .await
    .unwrap();
    let next = within(fork.append(msg(user("in the fork")))).await.unwrap();
    assert_eq!(next.parent_id, branch.last().map(|e| e.id.clone()));
    within(fork.close()).await.unwrap();
    let forked = within(load(fork.path())).await.unwrap();
    assert_ne!(forked.header.id, loaded.header.id);
    assert_eq!(
        forked.header.parent_session.as_deref(),
        Some(loaded.path.to_str().unwrap())
    );
    assert_eq!(forked.entries[..branch.len()], branch[..]);
    assert_eq!(forked.messages().len(), 4);
}

#[tokio::test]
async fn a_cut_last_line_is_recovered_and_truncated_before_appending() {
    let (_dir, store, cwd) = temp_store();
    let writer = within(store.create(&cwd, None)).await.unwrap();
    let a = within(writer.append(msg(user("one")))).await.unwrap();
    let b = within(writer.append(msg(assistant("two")))).await.unwrap();
    within(writer.append(msg(user("three, cut by a crash"))))
        .await
        .unwrap();
    within(writer.close()).await.unwrap();

    let path = writer.path().to_path_buf();
    let text = fs::read_to_string(&path).unwrap();
    let last_start = text.trim_end_matches('\n').rfind('\n').unwrap() + 1;
    let cut = last_start + (text.len() - last_start) / 2;
    fs::write(&path, &text[..cut]).unwrap();

    let loaded = within(load(&path)).await.unwrap();
    assert!(loaded.recovered_tail);
    assert_eq!(loaded.entries.len(), 2);
    assert_eq!(loaded.leaf_id.as_deref(), Some(b.id.as_str()));

    let writer = within(loaded.into_writer()).await.unwrap();
    let c = within(writer.append(msg(user("three again"))))
        .await
        .unwrap();
    assert_eq!(c.parent_id.as_deref(), Some(b.id.as_str()));
    within(writer.close()).await.unwrap();

    let text = fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    let reloaded = within(load(&path)).await.unwrap();
    assert!(!reloaded.recovered_tail);
    let ids: Vec<&str> = reloaded.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, [a.id.as_str(), b.id.as_str(), c.id.as_str()]);
    let texts: Vec<String> = reloaded.messages().iter().map(text_of).collect();
    assert_eq!(texts, ["one", "two", "three again"]);
}

#[tokio::test]
async fn a_zero_filled_tail_is_recovered() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("s.jsonl");
    write_raw(&path, &[&raw_entry("aaaaaaaa", None, "x")], "\n");
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0u8; 64]);
    fs::write(&path, bytes).unwrap();
    let loaded = within(load(&path)).await.unwrap();
    assert!(loaded.recovered_tail);
    assert_eq!(loaded.entries.len(), 1);
}

#[tokio::test]
async fn a_complete_but_unterminated_last_line_gets_its_newline() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("s.jsonl");
    write_raw(&path, &[&raw_entry("aaaaaaaa", None, "x")], "\n");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.trim_end()).unwrap();

    let loaded = within(load(&path)).await.unwrap();
    assert!(!loaded.recovered_tail);
    assert_eq!(loaded.entries.len(), 1);
    let writer = within(loaded.into_writer()).await.unwrap();
    assert_eq!(writer.id(), "s1");
    within(writer.append(msg(user("y")))).await.unwrap();
    within(writer.close()).await.unwrap();
    let reloaded = within(load(&path)).await.unwrap();
    assert_eq!(reloaded.entries.len(), 2);
    assert_eq!(reloaded.entries[1].parent_id.as_deref(), Some("aaaaaaaa"));
}

#[tokio::test]
async fn a_corrupt_middle_line_is_an_error_with_its_line_number() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("s.jsonl");
    let a = raw_entry("aaaaaaaa", None, "x");
    let b = raw_entry("bbbbbbbb", Some("aaaaaaaa"), "y");
    write_raw(&path, &[&a, r#"{"type":"message","id":"#, &b], "\n");
    match within(load(&path)).await {
        Err(Error::Corrupt { line, path: p, .. }) => {
            assert_eq!(line, 3);
            assert_eq!(p, path);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A known type with the wrong shape is corrupt too.
    write_raw(&path, &[r#"{"type":"model_change","id":"x"}"#, &a], "\n");
    assert!(matches!(
        within(load(&path)).await,
        Err(Error::Corrupt { line: 2, .. })
    ));
}

#[tokio::test]
async fn unknown_entry_types_are_skipped_but_keep_the_tree_linked() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("s.jsonl");
    let a = raw_entry("aaaaaaaa", None, "first");
    let unknown =
        r#"{"type":"branch_summary","id":"cccccccc","parentId":"aaaaaaaa","summary":"…"}"#;
    let b = raw_entry("bbbbbbbb", Some("cccccccc"), "second");
    write_raw(&path, &[&a, unknown, &b, r#"{"type":"label"}"#], "\n");
    let loaded = within(load(&path)).await.unwrap();
    assert!(!loaded.recovered_tail);
    assert_eq!(loaded.entries.len(), 2);
    let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
    assert_eq!(texts, ["first", "second"]);

    // The writer knows the skipped id, so it can branch from it.
    let writer = within(loaded.into_writer()).await.unwrap();
    within(writer.set_leaf(Some("cccccccc".into())))
        .await
        .unwrap();
    let c = within(writer.append(msg(user("third")))).await.unwrap();
    assert_eq!(c.parent_id.as_deref(), Some("cccccccc"));
    within(writer.close()).await.unwrap();
    let texts: Vec<String> = within(load(&path))
        .await
        .unwrap()
        .messages()
        .iter()
        .map(text_of)
        .collect();
    assert_eq!(texts, ["first", "third"]);
}

#[tokio::test]
async fn crlf_and_blank_lines_are_tolerated() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("s.jsonl");
    let a = raw_entry("aaaaaaaa", None, "x");
    let b = raw_entry("bbbbbbbb", Some("aaaaaaaa"), "y");
    write_raw(&path, &[&a, "", &b, ""], "\r\n");
    let loaded = within(load(&path)).await.unwrap();
    assert!(!loaded.recovered_tail);
    assert_eq!(loaded.entries.len(), 2);
    assert_eq!(loaded.leaf_id.as_deref(), Some("bbbbbbbb"));
    assert_eq!(loaded.messages().len(), 2);
}

#[tokio::test]
async fn bad_headers_are_clear_errors() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("s.jsonl");
    fs::write(&path, "").unwrap();
    assert!(matches!(
        within(load(&path)).await,
        Err(Error::InvalidHeader { .. })
    ));
    fs::write(&path, format!("{}\n", raw_entry("aaaaaaaa", None, "x"))).unwrap();
    let err = within(load(&path)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidHeader { .. }), "{err}");
    assert!(err.to_string().contains("invalid session header"), "{err}");
    fs::write(&path, r#"{"type":"session","version":1,"id":"#).unwrap();
    assert!(matches!(
        within(load(&path)).await,
        Err(Error::InvalidHeader { .. })
    ));
    fs::write(
        &path,
        r#"{"type":"session","version":99,"id":"x","timestamp":"t","cwd":"/"}"#,
    )
    .unwrap();
    assert!(matches!(
        within(load(&path)).await,
        Err(Error::UnsupportedVersion { version: 99, .. })
    ));
    assert!(matches!(
        within(load(&dir.path().join("missing.jsonl"))).await,
        Err(Error::Io { .. })
    ));
}

#[tokio::test]
async fn reopening_a_file_changed_since_load_is_refused() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("s.jsonl");
    write_raw(
        &path,
        &[&raw_entry("aaaaaaaa", None, "x"), "{\"type\":"],
        "\n",
    );
    let loaded = within(load(&path)).await.unwrap();
    assert!(loaded.recovered_tail);
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str("\"message\"}\n");
    fs::write(&path, &text).unwrap();
    assert!(matches!(
        within(loaded.into_writer()).await,
        Err(Error::Modified { .. })
    ));
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
}

#[tokio::test]
async fn loads_a_hundred_thousand_entries() {
    let (dir, _store, _cwd) = temp_store();
    let path = dir.path().join("big.jsonl");
    let mut text = String::from(
        r#"{"type":"session","version":1,"id":"big","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    text.push('\n');
    let count = 100_000;
    let mut parent: Option<String> = None;
    for i in 0..count {
        let id = format!("{i:08x}");
        let body = if i % 2 == 0 {
            msg(user(&format!("question {i}")))
        } else {
            msg(assistant(&format!("answer {i}")))
        };
        let entry = Entry {
            id: id.clone(),
            parent_id: parent.replace(id),
            timestamp: "2025-01-01T00:00:01.000Z".into(),
            body,
        };
        text.push_str(&serde_json::to_string(&entry).unwrap());
        text.push('\n');
    }
    fs::write(&path, text).unwrap();
    let loaded = within(load(&path)).await.unwrap();
    assert_eq!(loaded.entries.len(), count);
    assert_eq!(loaded.branch().len(), count);
    assert_eq!(
        text_of(loaded.messages().last().unwrap()),
        format!("answer {}", count - 1)
    );
}

/// A file big enough that its lines are parsed in chunks on two threads:
/// `count` linked entries, one line each.
fn big_lines(count: usize) -> Vec<String> {
    let filler = "x".repeat(200);
    let mut parent: Option<String> = None;
    (0..count)
        .map(|i| {
            let id = format!("{i:08x}");
            let line = raw_entry(&id, parent.as_deref(), &format!("{i} {filler}"));
            parent = Some(id);
            line
        })
        .collect()
}

#[test]
fn a_corrupt_line_in_a_late_chunk_of_a_big_file_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut lines = big_lines(8000);
    assert!(lines.iter().map(String::len).sum::<usize>() > 2 * read::PARALLEL_MIN_BYTES);
    lines[6000] = r#"{"type":"message","id":"#.to_owned();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    write_raw(&path, &refs, "\n");
    match load_blocking(path.clone()) {
        // Line 1 is the header.
        Err(Error::Corrupt { line, .. }) => assert_eq!(line, 6002),
        other => panic!("expected Corrupt, got {other:?}"),
    }

    // The same line last is a cut write: recovered, everything before kept.
    lines.truncate(6001);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    write_raw(&path, &refs, "\n");
    let loaded = load_blocking(path).unwrap();
    assert!(loaded.recovered_tail);
    assert_eq!(loaded.entries.len(), 6000);
    assert_eq!(loaded.leaf_id.as_deref(), Some("0000176f"));
    assert_eq!(loaded.branch().len(), 6000);
}

#[test]
fn a_big_file_read_in_chunks_loads_as_read_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut lines = big_lines(8000);
    // An unknown type, a duplicate id, a branch and blank lines, spread
    // over the chunks.
    lines[2500] = r#"{"type":"label","id":"99999999","parentId":"000009c3"}"#.to_owned();
    lines[2501] = raw_entry("000009c5", Some("99999999"), "after the label");
    lines[4000] = raw_entry("00000010", Some("00000fa0"), "a duplicate id");
    lines[6000] = raw_entry("0000aaaa", Some("00000100"), "a branch");
    lines[7000] = String::new();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    write_raw(&path, &refs, "\n");
    let whole = read::load_in_chunks(path.clone(), usize::MAX).unwrap();
    assert!(whole.has_duplicate_ids && !whole.linear);
    for chunk_bytes in [512, 4096, 100_000] {
        let chunked = read::load_in_chunks(path.clone(), chunk_bytes).unwrap();
        assert_eq!(chunked.entries, whole.entries);
        assert_eq!(chunked.leaf_id, whole.leaf_id);
        assert_eq!(chunked.skipped, whole.skipped);
        assert_eq!(chunked.has_duplicate_ids, whole.has_duplicate_ids);
        assert_eq!(chunked.linear, whole.linear);
        assert_eq!(chunked.branch(), whole.branch());
        assert_eq!(chunked.entry("00000010"), whole.entry("00000010"));
        assert_eq!(chunked.messages(), whole.messages());
    }
    assert_eq!(
        whole.entry("00000010").map(|e| e.parent_id.as_deref()),
        Some(Some("00000fa0"))
    );

    // A linear file is known to be linear however it is read.
    let lines = big_lines(5000);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    write_raw(&path, &refs, "\n");
    for chunk_bytes in [usize::MAX, 1000] {
        let loaded = read::load_in_chunks(path.clone(), chunk_bytes).unwrap();
        assert!(loaded.linear);
        assert_eq!(loaded.branch().len(), 5000);
    }
}

#[tokio::test]
async fn resuming_moves_the_entries_into_a_tree_and_reopens_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = big_lines(6000);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    write_raw(&path, &refs, "\n");
    let loaded = within(load(&path)).await.unwrap();
    let messages = loaded.messages();
    let (tree, writer) = within(loaded.into_tree_and_writer()).await.unwrap();
    assert_eq!(tree.entries().len(), 6000);
    assert_eq!(tree.leaf(), Some("0000176f"));
    assert_eq!(tree.context().messages, messages);
    assert!(tree.get("00000000").is_some());
    // The writer knows every id and continues from the leaf.
    assert!(writer.contains("00000abc"));
    let next = within(writer.append(msg(user("more")))).await.unwrap();
    assert_eq!(next.parent_id.as_deref(), Some("0000176f"));
    within(writer.close()).await.unwrap();
    let reloaded = within(load(&path)).await.unwrap();
    assert_eq!(reloaded.entries.len(), 6001);
    assert_eq!(text_of(reloaded.messages().last().unwrap()), "more");
}

#[test]
fn settings_come_from_the_active_branch_linear_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let named = |id: &str, parent: &str, name: Option<&str>| {
        serde_json::to_string(&Entry {
            id: id.into(),
            parent_id: Some(parent.into()),
            timestamp: "t".into(),
            body: EntryBody::SessionInfo {
                name: name.map(str::to_owned),
            },
        })
        .unwrap()
    };
    let a = raw_entry("aaaaaaaa", None, "x");
    // Linear: the latest name wins, and a later clear clears it.
    write_raw(
        &path,
        &[&a, &named("bbbbbbbb", "aaaaaaaa", Some("one"))],
        "\n",
    );
    let loaded = load_blocking(path.clone()).unwrap();
    assert!(loaded.linear);
    assert_eq!(loaded.name().as_deref(), Some("one"));
    assert_eq!(loaded.last_model(), None);
    let clear = named("cccccccc", "bbbbbbbb", None);
    write_raw(
        &path,
        &[&a, &named("bbbbbbbb", "aaaaaaaa", Some("one")), &clear],
        "\n",
    );
    assert_eq!(load_blocking(path.clone()).unwrap().name(), None);
    // Not linear: a name on another branch does not count.
    let other = named("dddddddd", "aaaaaaaa", Some("elsewhere"));
    let back = raw_entry("eeeeeeee", Some("bbbbbbbb"), "y");
    write_raw(
        &path,
        &[
            &a,
            &named("bbbbbbbb", "aaaaaaaa", Some("one")),
            &other,
            &back,
        ],
        "\n",
    );
    let loaded = load_blocking(path).unwrap();
    assert!(!loaded.linear);
    assert_eq!(loaded.name().as_deref(), Some("one"));
}

#[test]
fn a_parent_cycle_does_not_hang_the_branch_walk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let a = raw_entry("aaaaaaaa", Some("bbbbbbbb"), "x");
    let b = raw_entry("bbbbbbbb", Some("aaaaaaaa"), "y");
    write_raw(&path, &[&a, &b], "\n");
    let loaded = load_blocking(path).unwrap();
    assert!(loaded.branch().len() <= 3);
}

#[tokio::test]
async fn a_writer_reloaded_after_another_appended_goes_on_after_it() {
    let (_dir, store, cwd) = temp_store();
    let mine = within(store.create(&cwd, None)).await.unwrap();
    within(mine.append(msg(user("one")))).await.unwrap();
    within(mine.flush()).await.unwrap();
    // Another process (a worker) opens the session and appends.
    let theirs = within(load(mine.path())).await.unwrap();
    let theirs = within(theirs.into_writer()).await.unwrap();
    let answer = within(theirs.append(msg(assistant("two")))).await.unwrap();
    within(theirs.close()).await.unwrap();
    // Without a reload this writer would chain after its own stale leaf
    // (in the database its append would be refused).
    let tree = within(mine.reload()).await.unwrap();
    assert_eq!(tree.leaf(), Some(answer.id.as_str()));
    let next = within(mine.append(msg(user("three")))).await.unwrap();
    assert_eq!(next.parent_id.as_deref(), Some(answer.id.as_str()));
    within(mine.close()).await.unwrap();
    let texts: Vec<String> = within(load(mine.path()))
        .await
        .unwrap()
        .messages()
        .iter()
        .map(text_of)
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
}
