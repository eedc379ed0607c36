//! `compact`, `branch`, `get_branch_messages`, `export_html`.
//!
//! `compact` runs in the background (its response comes when the summary
//! is written, so an `abort` sent meanwhile can cancel it); a run in
//! progress is aborted first, as pi does. `branch` moves the session's leaf
//! to before an earlier user message in the same file and answers with that
//! message's text for the host to edit. `export_html` renders the session's
//! entries (every branch) to one self-contained HTML file.

use crate::command::WireId;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::command::{CompactArgs, ExportHtmlArgs};
use crate::server::{Answer, Server};
use crate::wire_errors::{self, WireError};

impl Server {
    pub(super) async fn compact(&mut self, id: Option<&WireId>, args: CompactArgs) -> Answer {
        if self.model.is_none() {
            return Answer::Failed(wire_errors::no_model(
                &self.factory.models().no_model_hint(),
            ));
        }
        self.abort_and_wait().await;
        let handle = self.handle().clone();
        let out = self.out.clone();
        let id = id.map(WireId::to_owned);
        tokio::spawn(async move {
            match handle.compact(args.custom_instructions).await {
                Ok(result) => {
                    let data = serde_json::to_value(&result).unwrap_or(Value::Null);
                    out.respond_ok(id.as_deref(), "compact", Some(data)).await;
                }
                Err(e) => {
                    out.respond_err(id.as_deref(), "compact", &wire_errors::from_core(&e))
                        .await;
                }
            }
        });
        Answer::Sent
    }

    pub(super) async fn branch(&mut self, entry_id: &str) -> Result<Option<Value>, WireError> {
        self.abort_and_wait().await;
        let text = self
            .handle()
            .branch(entry_id)
            .await
            .map_err(|e| wire_errors::from_core(&e))?;
        Ok(Some(json!({"text": text, "cancelled": false})))
    }

    pub(super) fn get_branch_messages(&self) -> Result<Option<Value>, WireError> {
        let messages: Vec<Value> = self
            .handle()
            .branch_messages()
            .into_iter()
            .map(|(entry_id, text)| json!({"entryId": entry_id, "text": text}))
            .collect();
        Ok(Some(json!({ "messages": messages })))
    }

    pub(super) async fn export_html(
        &self,
        args: ExportHtmlArgs,
    ) -> Result<Option<Value>, WireError> {
        let snap = self.handle().snapshot();
        let tree = self.handle().tree();
        if !keel_export::has_messages(&tree) {
            return Err(wire_errors::nothing_to_export());
        }
        let parent = match &snap.session_file {
            Some(f) => parent_session(f).await,
            None => None,
        };
        let created = tree.entries().first().map(|e| e.timestamp.clone());
        let cwd = snap.cwd.display().to_string();
        let meta = keel_export::ExportMeta {
            session_id: &snap.session_id,
            name: snap.session_name.as_deref(),
            cwd: &cwd,
            created: created.as_deref(),
            file: snap.session_file.as_deref(),
            parent_session: parent.as_deref(),
        };
        let html = keel_export::render_html(&meta, &tree);
        let path: PathBuf = match args.output_path.filter(|p| !p.trim().is_empty()) {
            Some(p) => snap.cwd.join(p),
            None => snap
                .cwd
                .join(keel_export::default_file_name(&snap.session_id)),
        };
        let shown = path.display().to_string();
        keel_tools::bounded::check_writable(&path)
            .map_err(|e| wire_errors::export_failed(&shown, &e.to_string()))?;
        tokio::fs::write(&path, html)
            .await
            .map_err(|e| wire_errors::export_failed(&shown, &e.to_string()))?;
        let path = std::path::absolute(&path).unwrap_or(path);
        Ok(Some(json!({"path": path.display().to_string()})))
    }
}

/// The `parentSession` of a session file's header, if any.
async fn parent_session(file: &Path) -> Option<String> {
    keel_session_store::header_of(file)
        .await
        .ok()?
        .parent_session
}
