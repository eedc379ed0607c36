//! Retries in the app-server: each one is an `error` notification with
//! `willRetry: true`; the items of the failed attempt are abandoned and the
//! turn completes with the retried answer.

use serde_json::json;

use super::Dialect;
use crate::suite::Env;

#[tokio::test]
async fn retries_are_reported_with_will_retry() {
    let env = Env::new().await;
    std::fs::write(
        env.home.path().join("config.toml"),
        "[retry]\nbase_delay_ms = 20\nmax_delay_ms = 1000\n",
    )
    .unwrap();
    let d = Dialect::Completions;
    env.mock.push_all([
        d.text("This first answer will be cut short")
            .cut_after(d.events_before_text() + 2),
        d.text("The whole answer."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&thread, "hi").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "completed", "{done}");
    let errors = s.seen("error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["params"]["willRetry"], true);
    assert_eq!(errors[0]["params"]["turnId"], turn.as_str());
    let completed: Vec<_> = s
        .seen("item/completed")
        .into_iter()
        .filter(|f| f["params"]["item"]["type"] == "agentMessage")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(
        completed[0]["params"]["item"]["text"],
        json!("The whole answer.")
    );
    s.close().await;
}
