//! Steering and follow-up queues.
//!
//! Steering messages are delivered between tool calls (the next model call
//! sees them); follow-up messages are delivered when the agent would
//! otherwise stop. Each queue drains either one message per delivery point
//! or all of them at once.

use std::collections::VecDeque;

use keel_protocol::{QueueMode, UserInput};

/// The two queues and their modes.
#[derive(Debug, Default)]
pub struct Queues {
    pub steering: VecDeque<UserInput>,
    pub follow_up: VecDeque<UserInput>,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
}

impl Queues {
    pub fn new(steering_mode: QueueMode, follow_up_mode: QueueMode) -> Self {
        Self {
            steering_mode,
            follow_up_mode,
            ..Self::default()
        }
    }

    /// Takes what the steering mode delivers now.
    pub fn take_steering(&mut self) -> Vec<UserInput> {
        drain(&mut self.steering, self.steering_mode)
    }

    /// Takes what the follow-up mode delivers now.
    pub fn take_follow_up(&mut self) -> Vec<UserInput> {
        drain(&mut self.follow_up, self.follow_up_mode)
    }

    pub fn has_steering(&self) -> bool {
        !self.steering.is_empty()
    }

    /// Texts of the queued messages, for `queue_update` events.
    pub fn snapshot(&self) -> (Vec<String>, Vec<String>) {
        (
            self.steering.iter().map(|m| m.message.clone()).collect(),
            self.follow_up.iter().map(|m| m.message.clone()).collect(),
        )
    }

    pub fn len(&self) -> usize {
        self.steering.len() + self.follow_up.len()
    }
}

fn drain(queue: &mut VecDeque<UserInput>, mode: QueueMode) -> Vec<UserInput> {
    match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(mode: QueueMode) -> Queues {
        let mut q = Queues::new(mode, mode);
        for m in ["a", "b", "c"] {
            q.steering.push_back(UserInput::text(m));
            q.follow_up.push_back(UserInput::text(m));
        }
        q
    }

    #[test]
    fn one_at_a_time_delivers_in_order() {
        let mut q = q(QueueMode::OneAtATime);
        let got: Vec<_> = (0..4)
            .map(|_| {
                q.take_steering()
                    .into_iter()
                    .map(|m| m.message)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(got, vec![vec!["a"], vec!["b"], vec!["c"], vec![]]);
        assert_eq!(q.take_follow_up()[0].message, "a");
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn all_drains_everything() {
        let mut q = q(QueueMode::All);
        assert_eq!(q.take_steering().len(), 3);
        assert!(q.take_steering().is_empty());
        assert_eq!(q.take_follow_up().len(), 3);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn snapshot_lists_texts() {
        let q = q(QueueMode::All);
        let (s, f) = q.snapshot();
        assert_eq!(s, vec!["a", "b", "c"]);
        assert_eq!(f.len(), 3);
        assert!(q.has_steering());
    }
}
