//! The writer task: the single owner of one session file while it is open for
//! appending.
//!
//! This module owns [`SessionWriter`] (a cloneable handle) and the task behind
//! it. Handles assign entry ids and move the leaf synchronously, then queue
//! fully serialised lines over a bounded channel; the task batches them into
//! a buffer, writes them with `write_all` and, on `flush`/`close`, calls
//! `sync_data`. File I/O runs on the blocking pool, never on async workers.
//! It must not know how files are found or parsed (`store`, `load`), nor any
//! wire protocol.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::files::Sink;
use crate::format::{Entry, EntryBody, now_rfc3339, random_entry_id, to_line};
use crate::ids::IdSet;

/// Capacity of the command channel between handles and the writer task.
/// `append` waits for room when the task falls this far behind.
pub const WRITER_CHANNEL_CAPACITY: usize = 256;

/// The task writes its buffer out (without syncing) once it holds this many
/// bytes, even if more lines are queued.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

enum Command {
    /// One complete serialised line, `\n` included.
    Append(Vec<u8>),
    /// Write and `sync_data` everything queued before; then answer.
    Flush(oneshot::Sender<Result<()>>),
    /// Like `Flush`, then stop.
    Close(oneshot::Sender<Result<()>>),
    /// Like `Flush`, then go on in this file instead (it was reopened after
    /// another process appended).
    Swap(Sink, oneshot::Sender<Result<()>>),
}

/// The I/O error that killed a writer task, kept so every later call can
/// report it.
type Failure = Arc<Mutex<Option<(io::ErrorKind, String)>>>;

/// A handle to the one writer task of a session file. Clones share the task,
/// the leaf and the set of known entry ids. When the last handle is dropped
/// the task writes and syncs what is queued, then stops; prefer
/// [`close`](Self::close), which reports errors.
#[derive(Clone)]
pub struct SessionWriter {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    path: PathBuf,
    tx: mpsc::Sender<Command>,
    state: Mutex<State>,
    failure: Failure,
}

struct State {
    leaf: Option<String>,
    ids: IdSet,
    closed: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts the writer task for `file` (opened for appending, positioned after
/// a complete line). Must be called inside a tokio runtime.
pub(crate) fn spawn(
    file: Sink,
    path: PathBuf,
    session_id: String,
    leaf: Option<String>,
    ids: IdSet,
) -> SessionWriter {
    spawn_syncing(file, path, session_id, leaf, ids, None)
}

/// [`spawn`] for a file just created whose bytes are not synced yet: the
/// task first syncs the file and `dir` (so the new directory entry is
/// durable too), off the caller's path, before anything queued.
pub(crate) fn spawn_syncing(
    file: Sink,
    path: PathBuf,
    session_id: String,
    leaf: Option<String>,
    ids: IdSet,
    dir: Option<PathBuf>,
) -> SessionWriter {
    let (tx, rx) = mpsc::channel(WRITER_CHANNEL_CAPACITY);
    let failure = Failure::default();
    tokio::spawn(run(file, path.clone(), rx, failure.clone(), dir));
    SessionWriter {
        inner: Arc::new(Inner {
            id: session_id,
            path,
            tx,
            state: Mutex::new(State {
                leaf,
                ids,
                closed: false,
            }),
            failure,
        }),
    }
}

impl fmt::Debug for SessionWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionWriter")
            .field("id", &self.inner.id)
            .field("path", &self.inner.path)
            .field("leaf", &self.leaf_id())
            .finish_non_exhaustive()
    }
}

impl SessionWriter {
    /// The session id (from the header).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The entry the next append will follow.
    pub fn leaf_id(&self) -> Option<String> {
        lock(&self.inner.state).leaf.clone()
    }

    /// Whether `id` names an entry of this session.
    pub fn contains(&self, id: &str) -> bool {
        lock(&self.inner.state).ids.contains(id)
    }

    /// Appends an entry: a fresh unique id, `parentId` = the current leaf,
    /// `timestamp` = now. The line is queued for the writer task (buffered,
    /// not yet synced) and the leaf moves to the new entry. Fails if the
    /// writer was closed or its task died (with the I/O error that killed it).
    pub async fn append(&self, body: EntryBody) -> Result<Entry> {
        self.check_failure()?;
        let permit = self
            .inner
            .tx
            .reserve()
            .await
            .map_err(|_| self.dead_error())?;
        // Ids, leaf and channel order are decided under one lock, so the file
        // order always matches the order in which the leaf moved.
        let mut state = lock(&self.inner.state);
        if state.closed {
            return Err(self.closed_error());
        }
        let id = loop {
            let id = random_entry_id();
            if !state.ids.contains(&id) {
                break id;
            }
        };
        let entry = Entry {
            id,
            parent_id: state.leaf.clone(),
            timestamp: now_rfc3339(),
            body,
        };
        let line = to_line(&entry)?;
        state.ids.insert(&entry.id);
        state.leaf = Some(entry.id.clone());
        permit.send(Command::Append(line));
        Ok(entry)
    }

    /// Resolves once every entry appended before this call is written and
    /// synced to disk (`sync_data`).
    pub async fn flush(&self) -> Result<()> {
        self.check_failure()?;
        let (tx, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Command::Flush(tx))
            .await
            .map_err(|_| self.dead_error())?;
        rx.await.map_err(|_| self.dead_error())?
    }

    /// Goes on in `file` (the same session reopened at its current end,
    /// after another process appended to it) with `leaf` and `ids` as
    /// that process left them; what was queued before is written first.
    pub(crate) async fn swap(&self, file: Sink, leaf: Option<String>, ids: IdSet) -> Result<()> {
        self.check_failure()?;
        let (tx, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Command::Swap(file, tx))
            .await
            .map_err(|_| self.dead_error())?;
        rx.await.map_err(|_| self.dead_error())??;
        let mut state = lock(&self.inner.state);
        state.leaf = leaf;
        state.ids = ids;
        Ok(())
    }

    /// Moves the leaf (branching): the next append's `parentId` is
    /// `entry_id`, which must name an entry of this session; `None` makes the
    /// next append a new root.
    pub async fn set_leaf(&self, entry_id: Option<String>) -> Result<()> {
        let mut state = lock(&self.inner.state);
        if state.closed {
            return Err(self.closed_error());
        }
        if let Some(id) = &entry_id
            && !state.ids.contains(id)
        {
            return Err(Error::UnknownEntry {
                path: self.inner.path.clone(),
                id: id.clone(),
            });
        }
        state.leaf = entry_id;
        Ok(())
    }

    /// Writes and syncs everything queued, then stops the task. Later appends
    /// fail with [`Error::WriterClosed`]. Closing twice is fine.
    pub async fn close(&self) -> Result<()> {
        let Ok(permit) = self.inner.tx.reserve().await else {
            // The task is gone: either closed before, or dead.
            return self.check_failure();
        };
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.state).closed = true;
        permit.send(Command::Close(tx));
        match rx.await {
            Ok(result) => result,
            // Another close got there first; the task finished it before
            // dropping our command.
            Err(_) => self.check_failure(),
        }
    }

    fn check_failure(&self) -> Result<()> {
        match &*lock(&self.inner.failure) {
            Some((kind, message)) => Err(Error::io(
                &self.inner.path,
                io::Error::new(*kind, message.clone()),
            )),
            None => Ok(()),
        }
    }

    fn closed_error(&self) -> Error {
        Error::WriterClosed {
            path: self.inner.path.clone(),
        }
    }

    /// The error for a task that no longer answers.
    fn dead_error(&self) -> Error {
        match self.check_failure() {
            Err(e) => e,
            Ok(()) => self.closed_error(),
        }
    }
}

/// The writer task.
async fn run(
    file: Sink,
    path: PathBuf,
    mut rx: mpsc::Receiver<Command>,
    failure: Failure,
    new_in: Option<PathBuf>,
) {
    let mut file = Some(file);
    if let Some(dir) = new_in
        && let Err(err) = sync_new(&mut file, dir).await
    {
        record_failure(&path, &failure, &err);
        // Answer every later command with the failure.
        while let Some(command) = rx.recv().await {
            if let Command::Flush(tx) | Command::Close(tx) = command {
                let _ = tx.send(Err(Error::io(
                    &path,
                    io::Error::new(err.kind(), err.to_string()),
                )));
            }
        }
        return;
    }
    let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BATCH_BYTES);
    // Bytes were written since the last sync.
    let mut unsynced = false;
    loop {
        let Some(first) = rx.recv().await else {
            // Every handle was dropped without `close`.
            if (!buf.is_empty() || unsynced)
                && let Err(err) = write_out(&mut file, &mut buf, true).await
            {
                record_failure(&path, &failure, &err);
            }
            return;
        };
        let mut waiters = Vec::new();
        let mut closing = None;
        let mut swapping = None;
        let mut next = Some(first);
        while let Some(command) = next {
            match command {
                Command::Append(line) => buf.extend_from_slice(&line),
                Command::Flush(tx) => waiters.push(tx),
                Command::Close(tx) => {
                    closing = Some(tx);
                    break;
                }
                Command::Swap(sink, tx) => {
                    swapping = Some((sink, tx));
                    break;
                }
            }
            if buf.len() >= WRITE_BATCH_BYTES {
                break;
            }
            next = rx.try_recv().ok();
        }
        let wrote = !buf.is_empty();
        let sync =
            (!waiters.is_empty() || closing.is_some() || swapping.is_some()) && (unsynced || wrote);
        let result = if sync || wrote {
            write_out(&mut file, &mut buf, sync).await
        } else {
            Ok(())
        };
        match result {
            Ok(()) => {
                unsynced = !sync && (unsynced || wrote);
                for waiter in waiters {
                    let _ = waiter.send(Ok(()));
                }
                if let Some(tx) = closing {
                    let _ = tx.send(Ok(()));
                    return;
                }
                if let Some((sink, tx)) = swapping {
                    file = Some(sink);
                    unsynced = false;
                    let _ = tx.send(Ok(()));
                }
            }
            Err(err) => {
                record_failure(&path, &failure, &err);
                let reply = || {
                    Err(Error::io(
                        &path,
                        io::Error::new(err.kind(), err.to_string()),
                    ))
                };
                for waiter in waiters {
                    let _ = waiter.send(reply());
                }
                if let Some(tx) = closing {
                    let _ = tx.send(reply());
                }
                if let Some((_, tx)) = swapping {
                    let _ = tx.send(reply());
                }
                return;
            }
        }
    }
}

fn record_failure(path: &Path, failure: &Failure, err: &io::Error) {
    tracing::error!(path = %path.display(), error = %err, "session writer failed; it accepts no more entries");
    *lock(failure) = Some((err.kind(), err.to_string()));
}

/// Syncs a new file and its directory on the blocking pool.
async fn sync_new(file: &mut Option<Sink>, dir: PathBuf) -> io::Result<()> {
    let Some(mut handle) = file.take() else {
        return Err(io::Error::other("the session file handle was lost"));
    };
    let (handle, result) = tokio::task::spawn_blocking(move || {
        let result = handle.sync_new(&dir);
        (handle, result)
    })
    .await
    .map_err(|e| io::Error::other(format!("session file I/O task failed: {e}")))?;
    *file = Some(handle);
    result
}

/// Writes `buf` (and syncs if asked) on the blocking pool, then empties it.
async fn write_out(file: &mut Option<Sink>, buf: &mut Vec<u8>, sync: bool) -> io::Result<()> {
    let Some(mut handle) = file.take() else {
        return Err(io::Error::other("the session file handle was lost"));
    };
    let data = std::mem::take(buf);
    let (handle, mut data, result) = tokio::task::spawn_blocking(move || {
        let result = handle
            .write_all(&data)
            .and_then(|()| if sync { handle.sync_data() } else { Ok(()) });
        (handle, data, result)
    })
    .await
    .map_err(|e| io::Error::other(format!("session file I/O task failed: {e}")))?;
    data.clear();
    *buf = data;
    *file = Some(handle);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::load;
    use crate::testutil::{assistant, msg, temp_store, text_of, user, within};

    #[tokio::test]
    async fn after_flush_another_reader_sees_every_line() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, None)).await.unwrap();
        // The header is on disk before `create` returns.
        let text = std::fs::read_to_string(writer.path()).unwrap();
        assert_eq!(text.lines().count(), 1);

        let mut ids = Vec::new();
        for i in 0..500 {
            let entry = within(writer.append(msg(user(&format!("m{i}")))))
                .await
                .unwrap();
            ids.push(entry.id);
        }
        within(writer.flush()).await.unwrap();
        let text = std::fs::read_to_string(writer.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 501);
        for (line, id) in lines[1..].iter().zip(&ids) {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(value["id"], id.as_str());
        }
        // A second flush with nothing new succeeds too.
        within(writer.flush()).await.unwrap();
        within(writer.close()).await.unwrap();
    }

    #[tokio::test]
    async fn set_leaf_branches_and_messages_follow_the_active_branch() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, None)).await.unwrap();
        assert_eq!(writer.leaf_id(), None);
        let a = within(writer.append(msg(user("a")))).await.unwrap();
        let b = within(writer.append(msg(assistant("b")))).await.unwrap();
        let c = within(writer.append(msg(user("c")))).await.unwrap();
        assert_eq!(writer.leaf_id(), Some(c.id.clone()));

        within(writer.set_leaf(Some(a.id.clone()))).await.unwrap();
        assert_eq!(writer.leaf_id(), Some(a.id.clone()));
        let d = within(writer.append(msg(assistant("d")))).await.unwrap();
        assert_eq!(d.parent_id.as_deref(), Some(a.id.as_str()));

        let err = within(writer.set_leaf(Some("ffffffff".into())))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::UnknownEntry { ref id, .. } if id == "ffffffff"));
        assert_eq!(writer.leaf_id(), Some(d.id.clone()));
        within(writer.close()).await.unwrap();

        let loaded = within(load(writer.path())).await.unwrap();
        assert_eq!(loaded.entries.len(), 4);
        assert_eq!(loaded.leaf_id.as_deref(), Some(d.id.as_str()));
        let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
        assert_eq!(texts, ["a", "d"]);
        let branch: Vec<&str> = loaded.branch().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(branch, [a.id.as_str(), d.id.as_str()]);
        // The abandoned branch is still in the file.
        assert!(loaded.entry(&b.id).is_some() && loaded.entry(&c.id).is_some());

        // Reopen, move the leaf back to the old branch and continue there.
        let writer = within(loaded.into_writer()).await.unwrap();
        within(writer.set_leaf(Some(c.id.clone()))).await.unwrap();
        within(writer.append(msg(assistant("e")))).await.unwrap();
        within(writer.set_leaf(None)).await.unwrap();
        let root = within(writer.append(msg(user("new root")))).await.unwrap();
        assert_eq!(root.parent_id, None);
        within(writer.set_leaf(Some(c.id.clone()))).await.unwrap();
        within(writer.append(msg(assistant("f")))).await.unwrap();
        within(writer.close()).await.unwrap();
        let texts: Vec<String> = within(load(writer.path()))
            .await
            .unwrap()
            .messages()
            .iter()
            .map(text_of)
            .collect();
        assert_eq!(texts, ["a", "b", "c", "f"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_from_clones_form_one_chain_in_file_order() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, None)).await.unwrap();
        let mut tasks = Vec::new();
        for t in 0..4 {
            let writer = writer.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..100 {
                    writer.append(msg(user(&format!("{t}-{i}")))).await.unwrap();
                }
            }));
        }
        for task in tasks {
            within(task).await.unwrap();
        }
        within(writer.close()).await.unwrap();
        let loaded = within(load(writer.path())).await.unwrap();
        assert_eq!(loaded.entries.len(), 400);
        let unique: std::collections::HashSet<&str> =
            loaded.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(unique.len(), 400);
        // Each entry's parent is the line before it.
        assert_eq!(loaded.entries[0].parent_id, None);
        for pair in loaded.entries.windows(2) {
            assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
        }
        assert_eq!(loaded.branch().len(), 400);
    }

    #[tokio::test]
    async fn a_closed_writer_refuses_work_and_closing_twice_is_fine() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, None)).await.unwrap();
        let clone = writer.clone();
        within(writer.append(msg(user("x")))).await.unwrap();
        within(writer.close()).await.unwrap();
        within(clone.close()).await.unwrap();
        assert!(matches!(
            within(clone.append(msg(user("y")))).await,
            Err(Error::WriterClosed { .. })
        ));
        assert!(matches!(
            within(clone.flush()).await,
            Err(Error::WriterClosed { .. })
        ));
        let loaded = within(load(writer.path())).await.unwrap();
        assert_eq!(loaded.entries.len(), 1);
    }

    #[tokio::test]
    async fn dropping_every_handle_still_writes_the_queue() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, None)).await.unwrap();
        let path = writer.path().to_path_buf();
        for i in 0..10 {
            within(writer.append(msg(user(&format!("{i}")))))
                .await
                .unwrap();
        }
        drop(writer);
        within(async {
            loop {
                let text = tokio::fs::read_to_string(&path).await.unwrap();
                if text.lines().count() == 11 {
                    break;
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_io_error_kills_the_writer_and_is_reported() {
        let Ok(file) = std::fs::OpenOptions::new().append(true).open("/dev/full") else {
            return;
        };
        let writer = spawn(
            Sink::Disk(file),
            PathBuf::from("/dev/full"),
            "s".into(),
            None,
            IdSet::default(),
        );
        within(writer.append(msg(user("x")))).await.unwrap();
        let err = within(writer.flush()).await.unwrap_err();
        let Error::Io { source, path } = &err else {
            panic!("expected Io, got {err:?}")
        };
        assert_eq!(path, Path::new("/dev/full"));
        assert_eq!(source.kind(), io::ErrorKind::StorageFull);
        // Every later call reports the same error.
        assert!(matches!(
            within(writer.append(msg(user("y")))).await,
            Err(Error::Io { .. })
        ));
        assert!(matches!(
            within(writer.flush()).await,
            Err(Error::Io { .. })
        ));
        assert!(matches!(
            within(writer.close()).await,
            Err(Error::Io { .. })
        ));
    }
}
