//! How `keel exec` shows held tool calls.
//!
//! Owns [`ExecFrontend`]: with a person at the terminal (stdin and stderr
//! are terminals) it shows the request on stderr and asks — `y` allow once,
//! `a` always allow (when the request offers it), `n` decline, `d` decline
//! with a note — and writes the answer to the engine; otherwise it prints
//! one line on stderr saying how to decide from another terminal (`keel
//! approvals approve <id>`), and the run waits on the stored row, which the
//! engine re-reads about every second. A decision made elsewhere ends the
//! question. Lines are read by one thread, so no answer is lost between
//! questions.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use keel_core::ApprovalFrontend;
use keel_core::keel_approvals::{ApprovalEngine, Decision, Delivery, PendingRequest, Resolution};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Lines typed at the terminal waiting to be read.
const LINE_QUEUE: usize = 16;

/// What a typed answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Approve,
    Always,
    Decline,
    /// Decline; ask for a note first.
    DeclineWithNote,
}

/// Reads one answer; `None` when it means nothing (ask again).
pub fn parse_answer(line: &str, always_offered: bool) -> Option<Answer> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Answer::Approve),
        "a" | "always" if always_offered => Some(Answer::Always),
        "n" | "no" => Some(Answer::Decline),
        "d" | "note" => Some(Answer::DeclineWithNote),
        _ => None,
    }
}

/// The line printed when nobody can be asked here.
pub fn hint(request: &PendingRequest) -> String {
    match request.delivery {
        Delivery::Wait => format!(
            "keel: waiting for approval {id}: {title} [{class}] — decide from another terminal: \
             keel approvals approve {id}  (or: keel approvals decline {id} --note \"…\")",
            id = request.id,
            title = request.title,
            class = request.class,
        ),
        Delivery::Draft => format!(
            "keel: held as draft {id}: {title} [{class}] — send it later with: keel approvals send {id}",
            id = request.id,
            title = request.title,
            class = request.class,
        ),
    }
}

/// The exec front end.
pub struct ExecFrontend {
    interactive: bool,
    asker: Arc<Asker>,
}

/// Asks at the terminal, one question at a time.
struct Asker {
    engine: ApprovalEngine,
    lines: tokio::sync::Mutex<Option<mpsc::Receiver<String>>>,
    /// Ends the question on screen when its request is decided elsewhere.
    asking: Mutex<Option<(String, CancellationToken)>>,
}

impl ExecFrontend {
    /// `interactive`: a person can answer on this terminal.
    pub fn new(engine: ApprovalEngine, interactive: bool) -> Arc<Self> {
        Arc::new(Self {
            interactive,
            asker: Arc::new(Asker {
                engine,
                lines: tokio::sync::Mutex::default(),
                asking: Mutex::default(),
            }),
        })
    }
}

impl Asker {
    fn asking(&self) -> MutexGuard<'_, Option<(String, CancellationToken)>> {
        self.asking.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ask(self: &Arc<Self>, request: PendingRequest) {
        let token = CancellationToken::new();
        *self.asking() = Some((request.id.clone(), token.clone()));
        let this = self.clone();
        tokio::spawn(async move {
            let mut guard = this.lines.lock().await;
            let rx = guard.get_or_insert_with(spawn_reader);
            let decision = tokio::select! {
                d = question(rx, &request) => d,
                _ = token.cancelled() => return,
            };
            let Some(decision) = decision else {
                say(&hint(&request));
                return;
            };
            match this
                .engine
                .decide(&request.id, decision, "terminal", None)
                .await
            {
                Ok(row) => say(&format!("keel: {} {}", row.id, row.status)),
                Err(e) => say(&format!("keel: {e}")),
            }
        });
    }

    /// The request was decided (here or elsewhere): stop asking about it.
    fn done(&self, id: &str) {
        let mut asking = self.asking();
        if let Some((current, token)) = asking.as_ref()
            && current == id
        {
            token.cancel();
            *asking = None;
        }
    }
}

#[allow(clippy::print_stderr)]
fn say(line: &str) {
    eprintln!("{line}");
}

#[allow(clippy::print_stderr)]
fn show(request: &PendingRequest) {
    eprintln!();
    eprintln!(
        "{}  [{}: {}]",
        request.title, request.class_label, request.reason
    );
    for line in &request.arg_lines {
        eprintln!("    {line}");
    }
    if let Some(address) = &request.address {
        eprintln!("    address: {address}");
    }
}

#[allow(clippy::print_stderr)]
fn prompt(text: &str) {
    eprint!("{text}");
    let _ = std::io::stderr().flush();
}

/// Asks until a valid answer; `None` when the terminal closed.
async fn question(rx: &mut mpsc::Receiver<String>, request: &PendingRequest) -> Option<Decision> {
    show(request);
    let options = match &request.always {
        Some(offer) => format!(
            "Allow? [y]es / [a]lways ({}) / [n]o / [d]ecline with a note: ",
            offer.label
        ),
        None => "Allow? [y]es / [n]o / [d]ecline with a note: ".to_owned(),
    };
    loop {
        prompt(&options);
        let line = rx.recv().await?;
        let Some(answer) = parse_answer(&line, request.always.is_some()) else {
            continue;
        };
        return Some(match answer {
            Answer::Approve => Decision::Approve,
            Answer::Always => Decision::ApproveAlways {
                scope: None,
                lifetime: Default::default(),
            },
            Answer::Decline => Decision::Decline {
                note: None,
                stop_turn: false,
            },
            Answer::DeclineWithNote => {
                prompt("Note for the agent: ");
                let note = rx.recv().await?;
                Decision::Decline {
                    note: Some(note.trim().to_owned()).filter(|n| !n.is_empty()),
                    stop_turn: false,
                }
            }
        });
    }
}

/// One thread reads the terminal's lines for the whole process.
fn spawn_reader() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(LINE_QUEUE);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        loop {
            let mut line = String::new();
            match lock.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.blocking_send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

#[async_trait::async_trait]
impl ApprovalFrontend for ExecFrontend {
    async fn requested(&self, request: &PendingRequest) {
        if self.interactive && request.delivery == Delivery::Wait {
            self.asker.ask(request.clone());
        } else {
            say(&hint(request));
        }
    }

    async fn resolved(&self, request: &PendingRequest, resolution: &Resolution) {
        self.asker.done(&request.id);
        if !self.interactive {
            let status = match resolution {
                Resolution::Approved { .. } => "approved",
                Resolution::Declined { .. } => "declined",
                Resolution::Expired { .. } => "expired",
                Resolution::Cancelled { .. } => "cancelled",
            };
            say(&format!("keel: {} {status}", request.id));
        }
    }
}

/// Installs the exec front end on `gate`.
pub fn install(gate: &keel_core::EngineGate, interactive: bool) {
    if let Ok(engine) = gate.engine() {
        gate.set_frontend(ExecFrontend::new(engine.clone(), interactive));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(parse_answer(" Y\n", false), Some(Answer::Approve));
        assert_eq!(parse_answer("a", true), Some(Answer::Always));
        assert_eq!(parse_answer("a", false), None, "no offer, no always");
        assert_eq!(parse_answer("no", true), Some(Answer::Decline));
        assert_eq!(parse_answer("d", true), Some(Answer::DeclineWithNote));
        assert_eq!(parse_answer("maybe", true), None);
    }
}
