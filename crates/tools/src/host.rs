//! Tools served by the embedding host, and host-owned URIs inside the file
//! tools.
//!
//! Owns two adapters: [`HostTool`], a [`Tool`] whose runs are delegated to a
//! [`HostToolRunner`] (the host executes it and streams partial results), and
//! [`HostUriTool`], which wraps `read`, `write` or `edit` so that a `path` of
//! the form `<scheme>://…` with a scheme the host owns goes to a
//! [`HostUriResolver`] instead of the file system (`edit` refuses such
//! paths: the model is told to `write` the full new content). It must not
//! know how the host is reached: the RPC layer implements both traits.

use std::sync::Arc;

use keel_protocol::{ContentBlock, ToolResult, ToolSpec};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::builtins::render_text;
use crate::error::{Error, Result};
use crate::{Tool, ToolContext, ToolOutput};

/// Runs host tools on the host.
#[async_trait::async_trait]
pub trait HostToolRunner: Send + Sync {
    /// Runs `tool` with `args` for the model's call `ctx.call_id`. Partial
    /// results go to `ctx.updates`; when `ctx.cancel` fires the run must end
    /// promptly with [`Error::Aborted`].
    async fn run(&self, tool: &str, ctx: &ToolContext, args: Value) -> Result<ToolOutput>;
}

/// A tool the host declared and executes.
pub struct HostTool {
    spec: ToolSpec,
    runner: Arc<dyn HostToolRunner>,
}

impl HostTool {
    pub fn new(spec: ToolSpec, runner: Arc<dyn HostToolRunner>) -> Self {
        Self { spec, runner }
    }
}

#[async_trait::async_trait]
impl Tool for HostTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn description(&self) -> &str {
        &self.spec.description
    }
    fn parameters(&self) -> Value {
        self.spec.parameters.clone()
    }
    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        self.runner.run(&self.spec.name, ctx, args).await
    }
}

/// How the host registered a scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostScheme {
    /// `write` may target it.
    pub writable: bool,
    /// Its content never changes once read.
    pub immutable: bool,
}

/// What the host returned for a read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostUriContent {
    pub content: String,
    pub content_type: Option<String>,
    pub notes: Vec<String>,
    pub immutable: bool,
}

/// Reads and writes host-owned URLs.
#[async_trait::async_trait]
pub trait HostUriResolver: Send + Sync {
    /// The registration of `scheme` (lowercase), if the host owns it now.
    fn scheme(&self, scheme: &str) -> Option<HostScheme>;
    async fn read(&self, url: &str, cancel: CancellationToken) -> Result<HostUriContent>;
    async fn write(&self, url: &str, content: &str, cancel: CancellationToken) -> Result<()>;
}

/// The lowercase scheme of `path` when it looks like `<scheme>://…`
/// (RFC 3986 scheme characters, at least two of them so a Windows drive
/// letter never matches).
pub fn uri_scheme(path: &str) -> Option<String> {
    let (scheme, _) = path.trim().split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    if scheme.len() < 2
        || !first.is_ascii_alphabetic()
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    Some(scheme.to_ascii_lowercase())
}

/// The lowercase scheme of a file tool call's `path` argument when it is
/// a `<scheme>://…` URI (see [`uri_scheme`]).
pub fn path_scheme(args: &Value) -> Option<String> {
    args.get("path")
        .and_then(Value::as_str)
        .and_then(uri_scheme)
}

/// Which file tool a [`HostUriTool`] wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileOp {
    Read,
    Write,
    Edit,
}

/// `read`, `write` or `edit`, routing host-owned URLs to the host.
pub struct HostUriTool {
    inner: Arc<dyn Tool>,
    op: FileOp,
    resolver: Arc<dyn HostUriResolver>,
}

/// Wraps the `read`, `write` and `edit` tools of `tools` with host URI
/// routing; other tools are returned unchanged.
pub fn with_host_uris(
    tools: Vec<Arc<dyn Tool>>,
    resolver: Arc<dyn HostUriResolver>,
) -> Vec<Arc<dyn Tool>> {
    tools
        .into_iter()
        .map(|tool| {
            let op = match tool.name() {
                "read" => FileOp::Read,
                "write" => FileOp::Write,
                "edit" => FileOp::Edit,
                _ => return tool,
            };
            Arc::new(HostUriTool {
                inner: tool,
                op,
                resolver: resolver.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

#[async_trait::async_trait]
impl Tool for HostUriTool {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }
    /// The wrapped tool's file, unless the path is a host URI (the host
    /// writes that, not the file system).
    fn write_target(&self, cwd: &std::path::Path, args: &Value) -> Option<std::path::PathBuf> {
        let hosted = path_scheme(args).is_some_and(|s| self.resolver.scheme(&s).is_some());
        if hosted {
            return None;
        }
        self.inner.write_target(cwd, args)
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let url = args
            .get("path")
            .and_then(Value::as_str)
            .map(|p| p.trim().to_owned());
        let target = url.as_deref().and_then(|u| {
            let scheme = uri_scheme(u)?;
            let reg = self.resolver.scheme(&scheme)?;
            Some((scheme, reg))
        });
        let (Some(url), Some((scheme, reg))) = (url, target) else {
            return self.inner.execute(ctx, args).await;
        };
        match self.op {
            FileOp::Read => {
                let got = self.resolver.read(&url, ctx.cancel.clone()).await?;
                let offset = args.get("offset").and_then(Value::as_u64);
                let limit = args.get("limit").and_then(Value::as_u64);
                let mut out = render_text(
                    &url,
                    &got.content,
                    offset.map(|n| n as usize),
                    limit.map(|n| n as usize),
                )?;
                if !got.notes.is_empty()
                    && let Some(ContentBlock::Text { text }) = out.result.content.first_mut()
                {
                    text.push_str(&format!(
                        "\n\n[Notes from the host: {}]",
                        got.notes.join("; ")
                    ));
                }
                out.result.details = Some(json!({
                    "url": url,
                    "contentType": got.content_type,
                    "immutable": got.immutable || reg.immutable,
                    "notes": got.notes,
                }));
                Ok(out)
            }
            FileOp::Write => {
                if !reg.writable {
                    return Err(Error::Failed(format!(
                        "{url} cannot be written: the host registered {scheme}:// as read-only"
                    )));
                }
                let Some(content) = args.get("content").and_then(Value::as_str) else {
                    return Err(Error::InvalidArguments(
                        "write: field `content`: missing or not a string".to_owned(),
                    ));
                };
                self.resolver
                    .write(&url, content, ctx.cancel.clone())
                    .await?;
                Ok(ToolOutput::success(ToolResult {
                    content: vec![ContentBlock::text(format!(
                        "Wrote {} bytes to {url}",
                        content.len()
                    ))],
                    details: Some(json!({"url": url, "bytes": content.len()})),
                }))
            }
            FileOp::Edit => Err(Error::Failed(format!(
                "edit cannot change {url}: {scheme}:// is owned by the host. Read it, then use \
                 write with the complete new content."
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::builtin_tools;

    #[test]
    fn schemes_are_recognised_and_lowercased() {
        assert_eq!(uri_scheme("DB://users/42").as_deref(), Some("db"));
        assert_eq!(uri_scheme("x-y.z+1://a").as_deref(), Some("x-y.z+1"));
        assert_eq!(uri_scheme("C://windows"), None);
        assert_eq!(uri_scheme("src/main.rs"), None);
        assert_eq!(uri_scheme("1db://x"), None);
        assert_eq!(
            path_scheme(&serde_json::json!({"path": " DB://users/42"})).as_deref(),
            Some("db")
        );
        assert_eq!(path_scheme(&serde_json::json!({"path": "src/a.rs"})), None);
        assert_eq!(path_scheme(&serde_json::json!({"command": "db://x"})), None);
    }

    #[derive(Default)]
    struct Fake {
        writes: Mutex<Vec<(String, String)>>,
    }

    #[async_trait::async_trait]
    impl HostUriResolver for Fake {
        fn scheme(&self, scheme: &str) -> Option<HostScheme> {
            match scheme {
                "db" => Some(HostScheme {
                    writable: true,
                    immutable: false,
                }),
                "ro" => Some(HostScheme::default()),
                _ => None,
            }
        }
        async fn read(&self, url: &str, _c: CancellationToken) -> Result<HostUriContent> {
            Ok(HostUriContent {
                content: format!("id=42\nurl={url}\n"),
                notes: vec!["cached".into()],
                ..HostUriContent::default()
            })
        }
        async fn write(&self, url: &str, content: &str, _c: CancellationToken) -> Result<()> {
            self.writes
                .lock()
                .unwrap()
                .push((url.to_owned(), content.to_owned()));
            Ok(())
        }
    }

    #[tokio::test]
    async fn routes_host_urls_and_leaves_files_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "local\n").unwrap();
        let fake = Arc::new(Fake::default());
        let tools = with_host_uris(builtin_tools(), fake.clone());
        let get = |n: &str| tools.iter().find(|t| t.name() == n).unwrap().clone();
        let ctx = ToolContext::local(dir.path(), CancellationToken::new());

        let out = get("read")
            .execute(&ctx, json!({"path": "db://users/42"}))
            .await
            .unwrap();
        let text = out.text();
        assert!(text.contains("id=42"), "{text}");
        assert!(text.contains("Notes from the host: cached"), "{text}");
        let out = get("read")
            .execute(&ctx, json!({"path": "f.txt"}))
            .await
            .unwrap();
        assert!(out.text().contains("local"));

        get("write")
            .execute(&ctx, json!({"path": "db://users/1", "content": "x"}))
            .await
            .unwrap();
        assert_eq!(fake.writes.lock().unwrap()[0].0, "db://users/1");
        let err = get("write")
            .execute(&ctx, json!({"path": "ro://a", "content": "x"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("read-only"));
        let err = get("edit")
            .execute(&ctx, json!({"path": "db://users/1", "edits": []}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("use write"), "{err}");
    }
}
