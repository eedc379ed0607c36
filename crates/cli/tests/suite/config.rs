//! Configuration: what to set when nothing is, config.toml, `config show`.

use keel_test_support::MockResponse;

use super::Env;

#[tokio::test]
async fn no_model_configured_says_what_to_set_in_one_line() {
    let env = Env::new().await;
    let out = env.keel().args(["exec", "hello"]).run().await.unwrap();
    assert_eq!(out.code(), Some(2));
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("keel: no model configured: set KEEL_PROVIDER and KEEL_MODEL")
    );
}

#[tokio::test]
async fn config_file_provider_is_used_and_env_overrides_it() {
    let env = Env::new().await;
    std::fs::write(
        env.home.path().join("config.toml"),
        format!(
            "[model]\nprovider = \"local\"\nid = \"from-file\"\n\n[providers.local]\nbase_url = \"{}\"\napi_key_env = \"LOCAL_KEY\"\nheaders = {{ \"X-Team\" = \"infra\" }}\n",
            env.mock.base_url()
        ),
    )
    .unwrap();
    env.mock
        .push_all([MockResponse::text("a"), MockResponse::text("b")]);
    let out = env
        .keel()
        .args(["exec", "hi"])
        .env("LOCAL_KEY", "local-secret-key-value")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let req = env.mock.last_request().unwrap();
    assert_eq!(req.body["model"], "from-file");
    assert_eq!(req.header("x-team"), Some("infra"));
    assert_eq!(
        req.header("authorization"),
        Some("Bearer local-secret-key-value")
    );

    let out = env
        .keel()
        .args(["exec", "hi"])
        .env("KEEL_MODEL", "from-env")
        .env("LOCAL_KEY", "local-secret-key-value")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(env.mock.last_request().unwrap().body["model"], "from-env");

    let out = env
        .keel()
        .args(["config", "show"])
        .env("LOCAL_KEY", "local-secret-key-value")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("provider = \"local\""),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("api_key_env = \"LOCAL_KEY\"  # set"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("local-secret-key-value"),
        "secrets are masked"
    );
}

#[tokio::test]
async fn invalid_config_file_is_a_clear_error() {
    let env = Env::new().await;
    std::fs::write(env.home.path().join("config.toml"), "[model]\nid = 5\n").unwrap();
    let out = env.keel().args(["exec", "hi"]).run().await.unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr.starts_with("keel: invalid "), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1);
}
