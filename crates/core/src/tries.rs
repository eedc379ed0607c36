//! One run out of several tries: a run elsewhere whose try died there
//! ended with an `agent_end`, and the try that went on began with an
//! `agent_start`. Owns [`TryJoin`], the one place that rule is kept, for
//! a front-end's own runs and for the runs it watches, and [`RunEnd`],
//! which says of a run's end whether its run took several tries (its
//! `agent_end` then lists only the last try's messages; the session holds
//! the whole run's). A leaf: it knows only the events.

use keel_protocol::AgentEvent;

use crate::event::SessionEvent;

/// Joins the tries of runs, in the order their events come; `K` tells
/// runs apart (two runs' ends and starts are not joined).
#[derive(Debug)]
pub struct TryJoin<K> {
    /// The last `agent_end` seen, of run `K`: the run's end, unless a
    /// next try of the same run starts.
    held: Option<(K, SessionEvent)>,
    /// The run in progress (or whose end is held) joined tries.
    joined: bool,
}

/// The end of one run: its last `agent_end`, and whether a try of the run
/// died before the one that ended it (that `agent_end` lists the last
/// try's messages only).
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub end: SessionEvent,
    pub several_tries: bool,
}

/// What to pass on after one event.
#[derive(Debug, PartialEq)]
pub struct Joined {
    /// An `agent_end` held before: the end of its run after all.
    pub ended: Option<RunEnd>,
    /// The event itself, unless it is held (an `agent_end`) or joined
    /// away (the next try's `agent_start`).
    pub event: Option<SessionEvent>,
}

impl<K> Default for TryJoin<K> {
    fn default() -> Self {
        Self {
            held: None,
            joined: false,
        }
    }
}

impl<K: PartialEq> TryJoin<K> {
    /// Takes the next event, of run `run`.
    pub fn next(&mut self, run: K, event: SessionEvent) -> Joined {
        if let Some((held_run, _)) = &self.held
            && *held_run == run
            && event.event == AgentEvent::AgentStart
        {
            // A try that died and the next are one run.
            self.held = None;
            self.joined = true;
            return Joined {
                ended: None,
                event: None,
            };
        }
        // Another event: the end held was its run's end after all.
        let ended = if self.held.is_some() {
            self.take()
        } else {
            None
        };
        if matches!(event.event, AgentEvent::AgentEnd { .. }) {
            self.held = Some((run, event));
            return Joined { ended, event: None };
        }
        Joined {
            ended,
            event: Some(event),
        }
    }

    /// Whether an `agent_end` waits to be told apart.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// The held `agent_end`: its run has ended (the next event begins
    /// another run).
    pub fn take(&mut self) -> Option<RunEnd> {
        let several_tries = std::mem::take(&mut self.joined);
        self.held
            .take()
            .map(|(_, end)| RunEnd { end, several_tries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(event: AgentEvent, seq: u64) -> SessionEvent {
        SessionEvent {
            event,
            log_seq: Some(seq),
        }
    }

    fn end(seq: u64) -> SessionEvent {
        at(AgentEvent::AgentEnd { messages: vec![] }, seq)
    }

    #[test]
    fn a_dead_try_and_the_next_of_the_same_run_are_one() {
        let mut join = TryJoin::default();
        assert_eq!(
            join.next("t1", at(AgentEvent::AgentStart, 1)).event,
            Some(at(AgentEvent::AgentStart, 1))
        );
        let held = join.next("t1", end(2));
        assert_eq!((held.ended, held.event), (None, None));
        assert!(join.holds());
        let joined = join.next("t1", at(AgentEvent::AgentStart, 3));
        assert_eq!((joined.ended, joined.event), (None, None));
        assert!(!join.holds());
        // The next try's events do not end the joining.
        join.next("t1", at(AgentEvent::TurnStart, 4));
        join.next("t1", end(4));
        assert_eq!(
            join.take(),
            Some(RunEnd {
                end: end(4),
                several_tries: true
            })
        );
        // The next run is one try again.
        join.next("t1", at(AgentEvent::AgentStart, 5));
        join.next("t1", end(6));
        assert_eq!(join.take().map(|e| e.several_tries), Some(false));
    }

    #[test]
    fn another_runs_start_ends_the_held_one() {
        let mut join = TryJoin::default();
        join.next("t1", end(2));
        let next = join.next("t2", at(AgentEvent::AgentStart, 3));
        assert_eq!(next.ended.map(|e| e.end), Some(end(2)));
        assert_eq!(next.event, Some(at(AgentEvent::AgentStart, 3)));
        // So does any other event of the same run.
        join.next("t2", end(4));
        let next = join.next("t2", at(AgentEvent::TurnStart, 5));
        assert_eq!(next.ended.map(|e| e.end), Some(end(4)));
        assert_eq!(next.event, Some(at(AgentEvent::TurnStart, 5)));
    }
}
