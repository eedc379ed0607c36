//! `prompt`, `steer`, `follow_up`, `abort_and_prompt`.
//!
//! `prompt` and `abort_and_prompt` are acknowledged at once; a failure to
//! schedule the run (no model, busy without `streamingBehavior`, session
//! closed) follows as a second response with the same `id`. `steer` and
//! `follow_up` queue the message while a run streams and start a run when
//! the session is idle.

use crate::command::WireId;
use keel_core::{Delivery, QueueKind};
use keel_protocol::{Op, UserInput};

use crate::command::{MessageArgs, PromptArgs, StreamingBehavior};
use crate::server::{Answer, Server};
use crate::wire_errors::{self, WireError};

impl Server {
    fn require_model(&self) -> Result<(), WireError> {
        match self.model {
            Some(_) => Ok(()),
            None => Err(wire_errors::no_model(
                &self.factory.models().no_model_hint(),
            )),
        }
    }

    pub(super) async fn prompt(&mut self, id: Option<&WireId>, args: PromptArgs) -> Answer {
        self.out.respond_ok(id, "prompt", None).await;
        let input = UserInput {
            message: args.message,
            images: args.images,
        };
        let scheduled = match (self.require_model(), args.streaming_behavior) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(behavior)) => {
                let kind = match behavior {
                    StreamingBehavior::Steer => QueueKind::Steer,
                    StreamingBehavior::FollowUp => QueueKind::FollowUp,
                };
                self.handle()
                    .enqueue_or_start(input, kind)
                    .await
                    .map(|_| ())
                    .map_err(|e| wire_errors::from_core(&e))
            }
            (Ok(()), None) => match self.handle().submit(Op::Prompt(input)).await {
                Ok(()) => Ok(()),
                Err(keel_core::Error::Busy) => Err(wire_errors::busy_needs_streaming_behavior()),
                Err(e) => Err(wire_errors::from_core(&e)),
            },
        };
        if let Err(e) = scheduled {
            self.out.respond_err(id, "prompt", &e).await;
        }
        Answer::Sent
    }

    pub(super) async fn queue_message(
        &mut self,
        id: Option<&WireId>,
        name: &'static str,
        args: MessageArgs,
        steer: bool,
    ) -> Answer {
        if let Err(e) = self.require_model() {
            return Answer::Failed(e);
        }
        self.out.respond_ok(id, name, None).await;
        let kind = if steer {
            QueueKind::Steer
        } else {
            QueueKind::FollowUp
        };
        let input = UserInput {
            message: args.message,
            images: args.images,
        };
        match self.handle().enqueue_or_start(input, kind).await {
            Ok(Delivery::Started | Delivery::Queued | Delivery::Declined) => {}
            Err(e) => {
                self.out
                    .respond_err(id, name, &wire_errors::from_core(&e))
                    .await
            }
        }
        Answer::Sent
    }

    pub(super) async fn abort_and_prompt(
        &mut self,
        id: Option<&WireId>,
        args: MessageArgs,
    ) -> Answer {
        self.out.respond_ok(id, "abort_and_prompt", None).await;
        self.abort_and_wait().await;
        let input = UserInput {
            message: args.message,
            images: args.images,
        };
        let scheduled = match self.require_model() {
            Err(e) => Err(e),
            Ok(()) => self
                .handle()
                .submit(Op::Prompt(input))
                .await
                .map_err(|e| wire_errors::from_core(&e)),
        };
        if let Err(e) = scheduled {
            self.out.respond_err(id, "abort_and_prompt", &e).await;
        }
        Answer::Sent
    }
}
