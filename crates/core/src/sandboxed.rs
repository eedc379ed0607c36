//! The sandbox around one tool call: what it runs under, what a person's
//! yes adds, what the model is told when the sandbox stopped it, and the
//! question to re-run it with the missing permission.
//!
//! Owns [`spec_for`] (the session's policy, the call's grant), the
//! in-process check of keel's own writes ([`write_refusal`]: `write` and
//! `edit` meet the same walls as a confined command), [`refused`] (did the
//! sandbox stop this failed call, and what), [`grant_of`] (what a person's
//! yes to a classified call covers) and [`escalation`] (the call asking
//! for the missing permission, held through the normal durable gate). It
//! must not know how walls are built or which front end asks.

use keel_approvals::{Class, Classification, SANDBOX_PERMISSIONS_ARG, Target};
use keel_protocol::{SandboxGrant, SandboxPolicy};
use keel_sandbox::Refusal;
use keel_tools::SandboxSpec;

use crate::ctx::RunCtx;
use crate::deps::ToolCallInfo;
use crate::state::lock;

/// The suffix of the call id under which a re-run beyond the sandbox is
/// asked for (the original call keeps its own row).
pub const ESCALATION_SUFFIX: &str = "#sandbox";

/// What the call's processes run under: `None` when the session has no
/// sandbox.
pub(crate) fn spec_for(
    ctx: &RunCtx,
    info: &ToolCallInfo,
    grant: SandboxGrant,
) -> Option<SandboxSpec> {
    let policy = lock(&ctx.shared).config.sandbox.clone()?;
    ctx.deps.sandbox.as_ref()?;
    Some(SandboxSpec {
        policy,
        grant,
        workspace: info.cwd.clone(),
    })
}

/// The refusal of keel's own write of `info.write_target` under `spec`.
pub(crate) fn write_refusal(
    ctx: &RunCtx,
    spec: Option<&SandboxSpec>,
    info: &ToolCallInfo,
) -> Option<Refusal> {
    let (spec, target) = (spec?, info.write_target.as_ref()?);
    let sandbox = ctx.deps.sandbox.as_ref()?;
    let granted = spec.grant.writable.iter().any(|g| target == g);
    (!granted && !sandbox.may_write(spec, target)).then(|| Refusal {
        network: false,
        paths: vec![target.clone()],
    })
}

/// What the sandbox refused the failed call that printed `text`, if it
/// was the sandbox.
pub(crate) fn refused(ctx: &RunCtx, spec: Option<&SandboxSpec>, text: &str) -> Option<Refusal> {
    let spec = spec.filter(|s| s.confines())?;
    let sandbox = ctx.deps.sandbox.as_ref()?;
    keel_sandbox::refusal(text, &spec.workspace, &sandbox.plan(spec))
}

/// The text the model reads about a call the sandbox stopped.
pub(crate) fn blocked_text(policy: &SandboxPolicy, refusal: &Refusal) -> String {
    format!(
        "Blocked by the sandbox ({}, network {}): {}.",
        policy.mode,
        if policy.network_access { "on" } else { "off" },
        refusal.describe()
    )
}

/// The call that asks for `refusal`'s missing permissions: the same tool
/// and arguments with a `sandbox_permissions` argument, under its own id.
pub(crate) fn escalation(info: &ToolCallInfo, refusal: &Refusal) -> Option<ToolCallInfo> {
    let mut args = info.args.clone();
    let obj = args.as_object_mut()?;
    if obj.contains_key(SANDBOX_PERMISSIONS_ARG) {
        // It already ran with what it asked for: ask no further.
        return None;
    }
    obj.insert(
        SANDBOX_PERMISSIONS_ARG.to_owned(),
        serde_json::to_value(refusal.grant()).ok()?,
    );
    Some(ToolCallInfo {
        call_id: format!("{}{ESCALATION_SUFFIX}", info.call_id),
        args,
        ..info.clone()
    })
}

/// What a person's yes to the classified call `c` lets it do beyond the
/// policy: network when it reaches out (send or money), the files it
/// writes outside the workspace, and whatever its `sandbox_permissions`
/// argument asked for.
pub fn grant_of(c: &Classification, call: &ToolCallInfo) -> SandboxGrant {
    let mut g = SandboxGrant {
        network: c.class >= Class::Send,
        ..SandboxGrant::default()
    };
    if c.escapes {
        match &c.target {
            Target::Path { absolute, .. } => g.writable.push(
                call.write_target
                    .clone()
                    .unwrap_or_else(|| absolute.clone()),
            ),
            Target::Shell { analysis } => g.writable.extend(analysis.outside.iter().cloned()),
            Target::None | Target::Host { .. } => {}
        }
    }
    if let Some(asked) = call
        .args
        .get(SANDBOX_PERMISSIONS_ARG)
        .and_then(|v| serde_json::from_value::<SandboxGrant>(v.clone()).ok())
    {
        g.widen(asked);
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_approvals::{Places, ToolOrigin, classify_judged};
    use serde_json::json;

    fn info(tool: &str, args: serde_json::Value, cwd: &std::path::Path) -> ToolCallInfo {
        ToolCallInfo {
            session_id: "s".into(),
            call_id: "c".into(),
            tool_name: tool.into(),
            args,
            cwd: cwd.to_path_buf(),
            write_target: None,
            hints: None,
        }
    }

    fn grant(i: &ToolCallInfo) -> SandboxGrant {
        let places = Places::new(&i.cwd);
        let c = classify_judged(&i.tool_name, &i.args, ToolOrigin::Builtin, &places, None);
        grant_of(&c, i)
    }

    #[test]
    fn a_yes_grants_what_the_call_was_judged_as() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        // Reaches out: network, no paths.
        let g = grant(&info(
            "bash",
            json!({"command": "curl https://example.com"}),
            &ws,
        ));
        assert!(g.network && g.writable.is_empty() && !g.unconfined);
        // Writes outside: that path (and network: it is send).
        let g = grant(&info(
            "bash",
            json!({"command": "echo x > /etc/keel-test"}),
            &ws,
        ));
        assert_eq!(g.writable, vec![std::path::PathBuf::from("/etc/keel-test")]);
        // A read grants nothing.
        assert!(grant(&info("bash", json!({"command": "ls"}), &ws)).is_empty());
        // An escalation grants what it asked for.
        let g = grant(&info(
            "bash",
            json!({"command": "ls", "sandbox_permissions": {"unconfined": true}}),
            &ws,
        ));
        assert!(g.unconfined);
    }

    #[test]
    fn an_escalation_asks_once_under_its_own_id() {
        let i = info("bash", json!({"command": "ls"}), std::path::Path::new("/"));
        let r = Refusal {
            network: true,
            paths: Vec::new(),
        };
        let e = escalation(&i, &r).unwrap();
        assert_eq!(e.call_id, "c#sandbox");
        assert_eq!(e.args["sandbox_permissions"]["network"], json!(true));
        assert!(escalation(&e, &r).is_none());
    }
}
