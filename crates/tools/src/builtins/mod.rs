//! The built-in tools.
//!
//! Owns the seven tools keel ships (`read`, `bash`, `edit`, `write`, `grep`,
//! `find`, `ls`, one file each) and what they share: argument parsing with
//! clear messages that name the offending field, and lenient number/boolean
//! parsing (models sometimes send `"10"` for `10`). Tools reach files and
//! processes only through the backends in the [`ToolContext`]; they must not
//! touch `std::fs`/`std::process` directly, and must not know about approvals
//! or the session.

mod bash;
mod edit;
mod find;
mod grep;
mod ls;
mod read;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::{Tool, ToolContext};

pub use bash::BashTool;
pub use edit::EditTool;
pub use find::FindTool;
pub use grep::GrepTool;
pub use ls::LsTool;
pub use read::ReadTool;
pub(crate) use read::render_text;
pub use write::WriteTool;

/// All built-in tools, in the order read, bash, edit, write, grep, find, ls.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadTool),
        Arc::new(BashTool),
        Arc::new(EditTool),
        Arc::new(WriteTool),
        Arc::new(GrepTool),
        Arc::new(FindTool),
        Arc::new(LsTool),
    ]
}

/// Where the `path` argument of a file-writing call lands (for
/// [`Tool::write_target`]): resolved against `cwd`, then physically.
pub(crate) fn path_write_target(cwd: &Path, args: &Value) -> Option<PathBuf> {
    let raw = args.get("path")?.as_str()?;
    crate::path::resolve_path(cwd, raw)
        .ok()
        .map(|p| crate::path::physical_path(&p))
}

/// The file a writing tool reads and writes: the judged target when the
/// loop gave one, else `path`.
pub(crate) fn judged_or<'a>(ctx: &'a ToolContext, path: &'a Path) -> &'a Path {
    ctx.write_target.as_deref().unwrap_or(path)
}

/// Writes `contents`: exactly at the judged target (no symlink followed)
/// when the loop gave one, else at `path`.
pub(crate) async fn write_file(ctx: &ToolContext, path: &Path, contents: &[u8]) -> Result<()> {
    match &ctx.write_target {
        Some(target) => ctx.fs.write_judged(target, contents).await,
        None => ctx.fs.write(path, contents).await,
    }
}

/// Deserialises a tool's arguments, naming the offending field on failure.
/// `null` counts as an empty object.
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T> {
    let args = match args {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => args,
        other => {
            return Err(Error::InvalidArguments(format!(
                "{tool}: arguments must be a JSON object, got {}",
                kind(&other)
            )));
        }
    };
    serde_path_to_error::deserialize(args).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if field == "." || field.is_empty() {
            Error::InvalidArguments(format!("{tool}: {inner}"))
        } else {
            Error::InvalidArguments(format!("{tool}: field `{field}`: {inner}"))
        }
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An optional non-negative integer; accepts integral floats and numeric strings.
pub(crate) fn opt_usize<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<usize>, D::Error> {
    let expected = "expected a non-negative integer";
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u32::MAX as f64)
                    .map(|f| f as u64)
            })
            .and_then(|u| usize::try_from(u).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{expected}, got {n}"))),
        Some(Value::String(s)) => s
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| D::Error::custom(format!("{expected}, got {s:?}"))),
        Some(other) => Err(D::Error::custom(format!(
            "{expected}, got {}",
            kind(&other)
        ))),
    }
}

/// An optional number; accepts numeric strings.
pub(crate) fn opt_f64<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<f64>, D::Error> {
    let expected = "expected a number";
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{expected}, got {n}"))),
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .map(Some)
            .map_err(|_| D::Error::custom(format!("{expected}, got {s:?}"))),
        Some(other) => Err(D::Error::custom(format!(
            "{expected}, got {}",
            kind(&other)
        ))),
    }
}

/// An optional boolean; accepts `"true"`/`"false"` strings.
pub(crate) fn opt_bool<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<bool>, D::Error> {
    let expected = "expected a boolean";
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(other) => Err(D::Error::custom(format!(
            "{expected}, got {}",
            kind(&other)
        ))),
    }
}

/// Rejects a limit of zero.
pub(crate) fn positive_limit(tool: &str, limit: Option<usize>, default: usize) -> Result<usize> {
    match limit {
        Some(0) => Err(Error::InvalidArguments(format!(
            "{tool}: field `limit`: must be at least 1"
        ))),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// Returns [`Error::Aborted`] if the run was cancelled.
pub(crate) fn check_cancel(ctx: &crate::ToolContext) -> Result<()> {
    if ctx.cancel.is_cancelled() {
        Err(Error::Aborted)
    } else {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Helpers for the tools' tests.

    use std::path::Path;
    use std::time::Duration;

    use serde_json::Value;
    use tokio_util::sync::CancellationToken;

    use crate::{Result, Tool, ToolContext, ToolOutput};

    pub fn ctx(dir: &Path) -> ToolContext {
        ToolContext::local(dir, CancellationToken::new()).with_scratch_dir(dir.join(".scratch"))
    }

    pub async fn run(tool: &dyn Tool, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        tokio::time::timeout(Duration::from_secs(30), tool.execute(ctx, args))
            .await
            .expect("tool run hung")
    }

    pub async fn run_ok(tool: &dyn Tool, ctx: &ToolContext, args: Value) -> ToolOutput {
        match run(tool, ctx, args).await {
            Ok(out) => out,
            Err(e) => panic!("tool failed: {e}"),
        }
    }

    pub async fn run_err(tool: &dyn Tool, ctx: &ToolContext, args: Value) -> String {
        match run(tool, ctx, args).await {
            Ok(out) => panic!("expected an error, got {:?}", out.text()),
            Err(e) => e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    struct Sample {
        #[allow(dead_code)]
        path: String,
        #[serde(default, deserialize_with = "opt_usize")]
        limit: Option<usize>,
        #[serde(default, deserialize_with = "opt_bool")]
        flag: Option<bool>,
    }

    #[test]
    fn parse_errors_name_the_field() {
        let err = parse_args::<Sample>("t", json!({}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field `path`"), "{err}");
        let err = parse_args::<Sample>("t", json!({"path": 5}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("field `path`"), "{err}");
        let err = parse_args::<Sample>("t", json!({"path": "a", "limit": "x"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("field `limit`") && err.contains("non-negative integer"),
            "{err}"
        );
        let err = parse_args::<Sample>("t", json!([1]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be a JSON object"), "{err}");
    }

    #[test]
    fn lenient_numbers_and_booleans() {
        let s: Sample =
            parse_args("t", json!({"path": "a", "limit": "7", "flag": "true"})).unwrap();
        assert_eq!(s.limit, Some(7));
        assert_eq!(s.flag, Some(true));
        let s: Sample = parse_args("t", json!({"path": "a", "limit": 3.0, "extra": 1})).unwrap();
        assert_eq!(s.limit, Some(3));
        assert!(parse_args::<Sample>("t", json!({"path": "a", "limit": -1})).is_err());
    }

    #[test]
    fn builtins_are_in_order_with_object_schemas() {
        let names: Vec<String> = builtin_tools()
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        assert_eq!(
            names,
            ["read", "bash", "edit", "write", "grep", "find", "ls"]
        );
        for tool in builtin_tools() {
            let schema = tool.parameters();
            assert_eq!(schema["type"], "object", "{}", tool.name());
            assert!(schema["properties"].is_object(), "{}", tool.name());
            assert!(tool.description().len() > 80, "{}", tool.name());
            assert_eq!(tool.spec().name, tool.name());
        }
    }
}
