//! The commands of the `host_tools` sub-protocol (the `impl Server` half;
//! the types and the broker live in `crate::host_tools`).

use crate::command::SetHostToolsArgs;
use crate::command::WireId;
use crate::host_tools::validate;
use crate::server::Answer;
use crate::server::Server;
use crate::wire_errors::WireError;
use serde_json::{Value, json};

impl Server {
    pub(crate) fn set_host_tools(
        &mut self,
        args: SetHostToolsArgs,
    ) -> Result<Option<Value>, WireError> {
        let classes = crate::approvals::declared_classes(&args.tools)?;
        let specs = validate(args.tools)?;
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        self.brokers.host_tools.set(specs);
        if let Some(approvals) = &self.brokers.approvals {
            approvals.set_host_classes(classes);
        }
        self.refresh_tools();
        Ok(Some(json!({"toolNames": names})))
    }

    /// `set_host_tools`, answered; then a cut-off turn that waited for the
    /// host's tools goes on (its `agent_start` follows the response). With
    /// nothing cut off, or a run going, the resume does nothing.
    pub(crate) async fn set_host_tools_then_resume(
        &mut self,
        id: Option<&WireId>,
        args: SetHostToolsArgs,
    ) -> Answer {
        match self.set_host_tools(args) {
            Ok(data) => {
                self.out.respond_ok(id, "set_host_tools", data).await;
                self.resume_interrupted().await;
                Answer::Sent
            }
            Err(e) => Answer::Failed(e),
        }
    }
}
