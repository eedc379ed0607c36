//! Threads: the `Thread` object and its status, and the `thread/*` pairs.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::v2::{AskForApproval, SandboxMode, SandboxPolicy, SortDirection, Turn};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadActiveFlag {
    WaitingOnApproval,
    WaitingOnUserInput,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ThreadStatus {
    NotLoaded,
    Idle,
    SystemError,
    Active { active_flags: Vec<ThreadActiveFlag> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitInfo {
    pub sha: Option<String>,
    pub branch: Option<String>,
    pub origin_url: Option<String>,
}

/// A thread: a keel session seen through the protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    pub id: String,
    pub session_id: String,
    pub forked_from_id: Option<String>,
    pub parent_thread_id: Option<String>,
    /// Usually the first user message.
    pub preview: String,
    pub ephemeral: bool,
    pub model_provider: String,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
    pub status: ThreadStatus,
    /// The session file.
    pub path: Option<String>,
    pub cwd: String,
    pub cli_version: String,
    pub originator: Option<String>,
    pub source: String,
    pub thread_source: Option<String>,
    pub agent_nickname: Option<String>,
    pub agent_role: Option<String>,
    pub git_info: Option<GitInfo>,
    pub name: Option<String>,
    pub project_id: Option<String>,
    pub turns: Vec<Turn>,
    /// How the thread's history is kept: always `legacy` (every turn in
    /// one session file).
    #[serde(default)]
    pub history_mode: ThreadHistoryMode,
}

/// `Thread.historyMode`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum ThreadHistoryMode {
    #[default]
    Legacy,
    Paginated,
}

/// Settings a thread runs with; shared by start, resume and fork results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSessionResponse {
    pub thread: Thread,
    pub model: String,
    pub model_provider: String,
    pub service_tier: Option<String>,
    pub cwd: String,
    pub instruction_sources: Vec<String>,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: String,
    pub sandbox: SandboxPolicy,
    pub reasoning_effort: Option<String>,
}

pub type ThreadStartResponse = ThreadSessionResponse;
pub type ThreadResumeResponse = ThreadSessionResponse;
pub type ThreadForkResponse = ThreadSessionResponse;

// The thread settings `thread/start`, `thread/resume` and `thread/fork`
// all accept, flattened into each: the wire shape (and the JSON Schema) is
// that of Codex. Not a doc comment: schemars would copy it onto the
// structs that flatten it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadOverrides {
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub model_provider: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    #[serde(default)]
    pub base_instructions: Option<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
    /// A permission profile of `permissionProfile/list` (keel: the
    /// approval mode the thread runs under), instead of `approvalPolicy`.
    #[serde(default)]
    pub permissions: Option<String>,
    /// Config overrides (Codex's `-c key=value`, dotted keys or tables);
    /// keel reads `mcp_servers` from them.
    #[serde(default)]
    pub config: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    #[serde(flatten)]
    pub overrides: ThreadOverrides,
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
    #[serde(default)]
    pub ephemeral: Option<bool>,
    #[serde(default)]
    pub service_tier: Option<String>,
    #[serde(default)]
    pub service_name: Option<String>,
    #[serde(default)]
    pub thread_source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    pub thread_id: String,
    #[serde(flatten)]
    pub overrides: ThreadOverrides,
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
    #[serde(default)]
    pub exclude_turns: bool,
}

/// `thread/fork`: a new thread holding the history of another (through
/// `lastTurnId`, inclusive, when given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadForkParams {
    pub thread_id: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub last_turn_id: Option<String>,
    #[serde(flatten)]
    pub overrides: ThreadOverrides,
    #[serde(default)]
    pub ephemeral: bool,
    #[serde(default)]
    pub exclude_turns: bool,
}

/// `cwd` filter of `thread/list`: one directory or several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ThreadListCwdFilter {
    One(String),
    Many(Vec<String>),
}

impl ThreadListCwdFilter {
    pub fn paths(&self) -> Vec<String> {
        match self {
            ThreadListCwdFilter::One(p) => vec![p.clone()],
            ThreadListCwdFilter::Many(ps) => ps.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ThreadSortKey {
    #[serde(rename = "created_at")]
    CreatedAt,
    #[serde(rename = "updated_at")]
    UpdatedAt,
    #[serde(rename = "recency_at")]
    RecencyAt,
    #[serde(rename = "section_position")]
    SectionPosition,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub archived: Option<bool>,
    #[serde(default)]
    pub cwd: Option<ThreadListCwdFilter>,
    #[serde(default)]
    pub search_term: Option<String>,
    #[serde(default)]
    pub model_providers: Option<Vec<String>>,
    #[serde(default)]
    pub sort_key: Option<ThreadSortKey>,
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListResponse {
    pub data: Vec<Thread>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadParams {
    pub thread_id: String,
    #[serde(default)]
    pub include_turns: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadResponse {
    pub thread: Thread,
}

/// Params of the methods that only name a thread (`thread/archive`,
/// `thread/unarchive`, `thread/unsubscribe`, `thread/delete`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadIdParams {
    pub thread_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSetNameParams {
    pub thread_id: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLoadedListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLoadedListResponse {
    pub data: Vec<String>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadUnsubscribeStatus {
    NotLoaded,
    NotSubscribed,
    Unsubscribed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribeResponse {
    pub status: ThreadUnsubscribeStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTurnsListParams {
    pub thread_id: String,
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTurnsListResponse {
    pub data: Vec<Turn>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

/// Where a `thread/items/list` page starts: an opaque cursor, or an item of
/// the requested turn (exclusive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ThreadItemsListCursor {
    Opaque(String),
    Anchor(ThreadItemsListAnchor),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ThreadItemsListAnchor {
    Item { item_id: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemsListParams {
    pub thread_id: String,
    #[serde(default)]
    pub turn_id: Option<String>,
    #[serde(default)]
    pub cursor: Option<ThreadItemsListCursor>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
    #[serde(default)]
    pub defer_output: Option<Value>,
}

/// One item of a thread with the turn it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemEntry {
    pub turn_id: String,
    pub item: crate::v2::ThreadItem,
    pub started_at_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemsListResponse {
    pub data: Vec<ThreadItemEntry>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

/// `{thread}`: the results of `thread/unarchive` and `thread/metadata/update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResponse {
    pub thread: Thread,
}

/// A field of a patch: absent (leave it), `null` (clear it) or a value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Patch<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

impl<T> Patch<T> {
    /// Applies the patch to `slot`.
    pub fn apply(self, slot: &mut Option<T>) {
        match self {
            Patch::Keep => {}
            Patch::Clear => *slot = None,
            Patch::Set(v) => *slot = Some(v),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            Some(v) => Patch::Set(v),
            None => Patch::Clear,
        })
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for Patch<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Patch_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // Absent: unchanged; `null`: cleared; a value: replaced.
        Option::<T>::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

impl<T: Serialize> Serialize for Patch<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Patch::Keep | Patch::Clear => s.serialize_none(),
            Patch::Set(v) => v.serialize(s),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadMetadataGitInfoUpdateParams {
    #[serde(default)]
    pub sha: Patch<String>,
    #[serde(default)]
    pub branch: Patch<String>,
    #[serde(default)]
    pub origin_url: Patch<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadMetadataUpdateParams {
    pub thread_id: String,
    #[serde(default)]
    pub git_info: Option<ThreadMetadataGitInfoUpdateParams>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_and_params() {
        let s = ThreadStatus::Active {
            active_flags: vec![ThreadActiveFlag::WaitingOnApproval],
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"type": "active", "activeFlags": ["waitingOnApproval"]})
        );
        let e = serde_json::from_value::<ThreadStartParams>(json!({"cwd": 123})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid type: integer `123`, expected a string"
        );
        let p: ThreadListParams =
            serde_json::from_value(json!({"cwd": ["/a"], "unknownField": 1})).unwrap();
        assert_eq!(p.cwd.unwrap().paths(), vec!["/a".to_owned()]);
        let p: ThreadMetadataUpdateParams = serde_json::from_value(
            json!({"threadId": "t", "gitInfo": {"sha": null, "branch": "main"}}),
        )
        .unwrap();
        let g = p.git_info.unwrap();
        assert_eq!(g.sha, Patch::Clear);
        assert_eq!(g.branch, Patch::Set("main".into()));
        assert_eq!(g.origin_url, Patch::Keep);
        let p: ThreadItemsListParams = serde_json::from_value(
            json!({"threadId": "t", "cursor": {"type": "item", "itemId": "i"}}),
        )
        .unwrap();
        assert_eq!(
            p.cursor,
            Some(ThreadItemsListCursor::Anchor(ThreadItemsListAnchor::Item {
                item_id: "i".into()
            }))
        );
    }
}
