//! The three policies and what a grant adds.

use keel_protocol::{SandboxGrant, SandboxMode};

use super::{Lab, kernel_can_confine};

#[tokio::test]
async fn workspace_write_writes_the_workspace_and_the_temp_dir() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::WorkspaceWrite);
    let ran = lab
        .run(
            &spec,
            "mkdir -p src && echo hi > src/a.txt && mv src/a.txt b.txt && chmod +x b.txt && \
             echo t > $TMPD/t && ln -s b.txt c && rm c && cat b.txt",
        )
        .await;
    assert!(!ran.failed(), "{}", ran.output);
    assert_eq!(
        std::fs::read_to_string(lab.ws.join("b.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(std::fs::read_to_string(lab.tmp.join("t")).unwrap(), "t\n");
    lab.assert_untouched("workspace-write");
}

#[tokio::test]
async fn read_only_writes_nothing() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::ReadOnly);
    for script in ["echo x > a.txt", "echo x > $TMPD/t", "mkdir d"] {
        let ran = lab.run(&spec, script).await;
        assert!(ran.failed(), "{script}: {}", ran.output);
    }
    assert_eq!(super::names(&lab.ws), vec![".git", ".keel"]);
    let ran = lab.run(&spec, "cat .git/config > /dev/null").await;
    assert!(!ran.failed(), "{}", ran.output);
}

#[tokio::test]
async fn danger_full_access_has_no_walls() {
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::DangerFullAccess);
    let ran = lab.run(&spec, "echo x > $OUT/new").await;
    assert!(!ran.failed(), "{}", ran.output);
    assert!(lab.outside.join("new").exists());
}

#[tokio::test]
async fn a_granted_path_is_writable_for_that_call_only() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let target = lab.outside.join("granted.txt");
    let spec = lab.granted(
        SandboxMode::WorkspaceWrite,
        SandboxGrant {
            writable: vec![target.clone()],
            ..SandboxGrant::default()
        },
    );
    let ran = lab.run(&spec, "echo yes > $OUT/granted.txt").await;
    assert!(!ran.failed(), "{}", ran.output);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "yes\n");
    // The grant is that file, not its folder.
    let ran = lab.run(&spec, "echo x > $OUT/other").await;
    assert!(ran.failed(), "{}", ran.output);
    // Another call without the grant cannot write it.
    let plain = lab.spec(SandboxMode::WorkspaceWrite);
    let ran = lab.run(&plain, "echo again > $OUT/granted.txt").await;
    assert!(ran.failed(), "{}", ran.output);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "yes\n");
}

#[tokio::test]
async fn the_refusal_names_what_the_sandbox_stopped() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::WorkspaceWrite);
    let sandbox = lab.sandbox();
    let plan = sandbox.plan(&spec);
    let ran = lab.run(&spec, "touch $OUT/new").await;
    let r = keel_sandbox::refusal(&ran.output, &lab.ws, &plan).unwrap();
    assert_eq!(r.paths, vec![lab.outside.join("new")]);
    let ran = lab.run(&spec, "touch .git/x").await;
    let r = keel_sandbox::refusal(&ran.output, &lab.ws, &plan).unwrap();
    assert_eq!(r.paths, vec![lab.ws.join(".git")], "{}", ran.output);
    let ran = lab.run(&spec, "echo > /dev/tcp/127.0.0.1/9").await;
    let r = keel_sandbox::refusal(&ran.output, &lab.ws, &plan).unwrap();
    assert!(r.network, "{}", ran.output);
}

/// A folder keel keeps its secrets in (`keel_tools::keep_out`) cannot be
/// read, listed, written or unmounted by a command in any confined mode,
/// through any path to it; outside the sandbox it is untouched.
#[tokio::test]
async fn keels_secret_folders_are_hidden_from_commands() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let secrets = lab.home.join("mcp-credentials");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("remote.json"), "the-secret-token").unwrap();
    std::os::unix::fs::symlink(&secrets, lab.ws.join("link")).unwrap();
    keel_tools::keep_out([secrets.clone()]);
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let spec = lab.spec(mode);
        for script in [
            "cat $KHOME/mcp-credentials/remote.json",
            "cat link/remote.json",
            "grep -r secret $KHOME",
            "ls -A $KHOME/mcp-credentials | grep .",
            "echo x > $KHOME/mcp-credentials/new",
            "umount $KHOME/mcp-credentials && cat $KHOME/mcp-credentials/remote.json",
        ] {
            let ran = lab.run(&spec, script).await;
            assert!(
                ran.failed(),
                "{mode:?}: `{script}` succeeded: {}",
                ran.output
            );
            assert!(
                !ran.output.contains("the-secret-token"),
                "{mode:?}: `{script}`: {}",
                ran.output
            );
        }
        // The rest of keel's home is still there to read.
        let ran = lab.run(&spec, "cat $KHOME/keel.db").await;
        assert_eq!(ran.output, "db", "{mode:?}");
    }
    assert_eq!(
        std::fs::read_to_string(secrets.join("remote.json")).unwrap(),
        "the-secret-token"
    );
    assert!(!secrets.join("new").exists());
}
