//! Enums shared by several resources: approval policy, sandbox modes and
//! policies, sort orders.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// When the agent asks before acting: `untrusted`, `on-request`, `never`,
/// or (experimental) `{"granular": {…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AskForApproval {
    Named(ApprovalPolicyName),
    Granular { granular: Value },
}

/// The named approval policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ApprovalPolicyName {
    #[serde(rename = "untrusted")]
    Untrusted,
    #[serde(rename = "on-request")]
    OnRequest,
    #[serde(rename = "never")]
    Never,
}

impl<'de> Deserialize<'de> for AskForApproval {
    /// A string must be one of the names (serde's `unknown variant` error
    /// otherwise, as Codex reports `on-failure`); an object must be
    /// `{"granular": …}`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, schemars::JsonSchema)]
        struct Granular {
            granular: Value,
        }
        let v = Value::deserialize(d)?;
        match v {
            Value::String(_) => serde_json::from_value::<ApprovalPolicyName>(v)
                .map(AskForApproval::Named)
                .map_err(serde::de::Error::custom),
            Value::Object(_) => serde_json::from_value::<Granular>(v)
                .map(|g| AskForApproval::Granular {
                    granular: g.granular,
                })
                .map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "invalid type: {other}, expected an approval policy"
            ))),
        }
    }
}

/// The sandbox mode of `thread/start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

/// The sandbox policy reported by thread results and accepted by `turn/start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SandboxPolicy {
    DangerFullAccess,
    ReadOnly {
        #[serde(default)]
        network_access: bool,
    },
    ExternalSandbox {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network_access: Option<Value>,
    },
    WorkspaceWrite {
        #[serde(default)]
        writable_roots: Vec<String>,
        #[serde(default)]
        network_access: bool,
        #[serde(default)]
        exclude_tmpdir_env_var: bool,
        #[serde(default)]
        exclude_slash_tmp: bool,
    },
}

impl SandboxPolicy {
    /// The policy a sandbox mode stands for.
    pub fn from_mode(mode: SandboxMode) -> Self {
        match mode {
            SandboxMode::ReadOnly => SandboxPolicy::ReadOnly {
                network_access: false,
            },
            SandboxMode::WorkspaceWrite => SandboxPolicy::WorkspaceWrite {
                writable_roots: Vec::new(),
                network_access: false,
                exclude_tmpdir_env_var: false,
                exclude_slash_tmp: false,
            },
            SandboxMode::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        }
    }
}

/// Sort direction of list methods.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SortDirection {
    Asc,
    #[default]
    Desc,
}

/// An empty result object (`{}`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct EmptyResponse {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn approval_policy_names_and_errors() {
        let p: AskForApproval = serde_json::from_value(json!("on-request")).unwrap();
        assert_eq!(p, AskForApproval::Named(ApprovalPolicyName::OnRequest));
        let e = serde_json::from_value::<AskForApproval>(json!("on-failure")).unwrap_err();
        assert!(
            e.to_string().contains("unknown variant `on-failure`"),
            "{e}"
        );
        let g: AskForApproval = serde_json::from_value(json!({"granular": {}})).unwrap();
        assert!(matches!(g, AskForApproval::Granular { .. }));
        assert_eq!(serde_json::to_value(&p).unwrap(), json!("on-request"));
    }

    #[test]
    fn sandbox_shapes() {
        let p = SandboxPolicy::from_mode(SandboxMode::DangerFullAccess);
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"type": "dangerFullAccess"})
        );
        let w: SandboxPolicy =
            serde_json::from_value(json!({"type": "workspaceWrite", "networkAccess": true}))
                .unwrap();
        assert!(matches!(
            w,
            SandboxPolicy::WorkspaceWrite {
                network_access: true,
                ..
            }
        ));
    }
}
