//! The soak's checker: what the threads hold, what the workspace's
//! markers say ran, and what each connection saw, against what the
//! clients sent; and the latency figures.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use super::client::{Sent, Transcript, runs_file};

/// How often each prompt text is stored in `threads` (thread id → its
/// `thread/read` answer with turns), and whether a turn is in progress.
pub fn stored_prompts(threads: &HashMap<String, Value>) -> (HashMap<String, usize>, Vec<String>) {
    let mut counts = HashMap::new();
    let mut open = Vec::new();
    for (id, read) in threads {
        for turn in read["thread"]["turns"].as_array().into_iter().flatten() {
            if turn["status"] == "inProgress" {
                open.push(format!("{id}: {}", turn["id"]));
            }
            for item in turn["items"].as_array().into_iter().flatten() {
                if item["type"] != "userMessage" {
                    continue;
                }
                for part in item["content"].as_array().into_iter().flatten() {
                    if let Some(text) = part["text"].as_str() {
                        *counts.entry(text.to_owned()).or_insert(0) += 1;
                    }
                }
            }
        }
    }
    (counts, open)
}

/// Everything that broke a promise, as lines.
pub fn violations(
    sent: &[Sent],
    threads: &HashMap<String, Value>,
    transcripts: &[Transcript],
    ws: &[&Path],
) -> Vec<String> {
    let mut bad = Vec::new();
    let (stored, open) = stored_prompts(threads);
    for turn in open {
        bad.push(format!("a turn never ended: {turn}"));
    }
    for s in sent {
        let n = stored.get(&s.prompt).copied().unwrap_or(0);
        if s.acked && n != 1 {
            bad.push(format!("acknowledged prompt {} stored {n} times", s.tag));
        }
        if !s.acked && n > 1 {
            bad.push(format!("prompt {} stored {n} times", s.tag));
        }
        if s.stray_ends > 0 {
            bad.push(format!(
                "{} agent_end of other runs reached the client during {}",
                s.stray_ends, s.tag
            ));
        }
        if s.acked && s.ended.is_none() {
            bad.push(format!("the client never saw turn {} end", s.tag));
        }
        let runs: usize = ws
            .iter()
            .map(|dir| {
                std::fs::read_to_string(dir.join(runs_file(&s.tag)))
                    .map(|t| t.lines().count())
                    .unwrap_or(0)
            })
            .sum();
        if runs > 1 {
            bad.push(format!("the command of {} ran {runs} times", s.tag));
        }
        let completed = s.ended.as_deref() == Some("completed");
        if s.acked && completed && !s.interrupted && runs != 1 {
            bad.push(format!(
                "turn {} completed but its command ran {runs} times (held: {}, decided: {})",
                s.tag, s.held, s.decided
            ));
        }
    }
    for (i, t) in transcripts.iter().enumerate() {
        bad.extend(
            transcript_faults(t)
                .into_iter()
                .map(|f| format!("connection {i}: {f}")),
        );
    }
    bad
}

/// What one app-server connection saw twice or out of order: an item
/// completed twice, a turn started or completed twice, anything of a turn
/// after its end.
fn transcript_faults(frames: &Transcript) -> Vec<String> {
    let mut bad = Vec::new();
    let mut completed_items = HashSet::new();
    let mut started_turns = HashSet::new();
    let mut ended_turns = HashSet::new();
    for f in frames {
        let Some(method) = f["method"].as_str() else {
            continue;
        };
        if f.get("id").is_some() {
            continue; // a server request
        }
        let p = &f["params"];
        let turn = p["turnId"]
            .as_str()
            .or_else(|| p["turn"]["id"].as_str())
            .unwrap_or_default()
            .to_owned();
        if !turn.is_empty() && ended_turns.contains(&turn) && method != "thread/status/changed" {
            bad.push(format!("{method} after turn {turn} completed"));
        }
        match method {
            "item/completed" => {
                let item = p["item"]["id"].as_str().unwrap_or_default().to_owned();
                if !completed_items.insert((turn.clone(), item.clone())) {
                    bad.push(format!("item {item} of turn {turn} completed twice"));
                }
            }
            "turn/started" if !started_turns.insert(turn.clone()) => {
                bad.push(format!("turn {turn} started twice"));
            }
            "turn/completed" if !ended_turns.insert(turn.clone()) => {
                bad.push(format!("turn {turn} completed twice"));
            }
            _ => {}
        }
    }
    bad
}

/// The `p`th percentile of `xs` (nearest rank), if any.
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// The figures as a Markdown table: p50/p99 of each latency, calm and
/// under chaos.
pub fn figures(sent: &[Sent]) -> String {
    let cell = |xs: Vec<f64>| match (percentile(&xs, 50.0), percentile(&xs, 99.0)) {
        (Some(a), Some(b)) => format!("{a:.1} / {b:.1} ms ({} turns)", xs.len()),
        _ => "—".to_owned(),
    };
    let pick = |chaos: bool, f: fn(&Sent) -> Option<f64>| -> Vec<f64> {
        sent.iter()
            .filter(|s| s.chaos == chaos)
            .filter_map(f)
            .collect()
    };
    let mut out = String::from("| p50 / p99 | calm | chaos |\n| --- | --- | --- |\n");
    out.push_str(&format!(
        "| prompt → first delta | {} | {} |\n",
        cell(pick(false, |s| s.first_delta_ms)),
        cell(pick(true, |s| s.first_delta_ms))
    ));
    out.push_str(&format!(
        "| decision → tool start | {} | {} |\n",
        cell(pick(false, |s| s.decision_to_tool_ms)),
        cell(pick(true, |s| s.decision_to_tool_ms))
    ));
    out
}

#[test]
fn percentiles_are_nearest_rank() {
    let xs = [5.0, 1.0, 3.0, 2.0, 4.0];
    assert_eq!(percentile(&xs, 50.0), Some(3.0));
    assert_eq!(percentile(&xs, 99.0), Some(5.0));
    assert_eq!(percentile(&[], 50.0), None);
}

#[test]
fn every_lost_acknowledged_prompt_fails_the_soak() {
    let sent = |tag: &str| Sent {
        tag: tag.to_owned(),
        prompt: format!("soak-{tag}"),
        acked: true,
        ..Sent::default()
    };
    let bad = violations(&[sent("a")], &HashMap::new(), &[], &[]);
    assert!(
        bad.iter().any(|l| l.contains("prompt a stored 0 times")),
        "{bad:?}"
    );
    assert!(
        bad.iter().any(|l| l.contains("never saw turn a end")),
        "{bad:?}"
    );
}

#[test]
fn a_transcript_with_a_repeat_is_caught() {
    let frames: Transcript = vec![
        serde_json::json!({"method": "turn/started", "params": {"turn": {"id": "t1"}}}),
        serde_json::json!({"method": "item/completed", "params": {"turnId": "t1", "item": {"id": "i1"}}}),
        serde_json::json!({"method": "item/completed", "params": {"turnId": "t1", "item": {"id": "i1"}}}),
        serde_json::json!({"method": "turn/completed", "params": {"turn": {"id": "t1"}}}),
        serde_json::json!({"method": "item/completed", "params": {"turnId": "t1", "item": {"id": "i2"}}}),
    ];
    let faults = transcript_faults(&frames);
    assert_eq!(faults.len(), 2, "{faults:?}");
}
