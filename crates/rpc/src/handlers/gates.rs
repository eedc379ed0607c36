//! The commands of the `gates` sub-protocol (the `impl Server` half;
//! the types and the broker live in `crate::gates`).

use crate::command::GateResponseArgs;
use crate::server::Server;
use crate::wire_errors::WireError;
use serde_json::Value;

impl Server {
    pub(crate) async fn workflow_gate_response(
        &self,
        args: GateResponseArgs,
    ) -> Result<Option<Value>, WireError> {
        self.brokers
            .gates
            .respond(&args.gate_id, &args.answer, args.idempotency_key.as_deref())
            .await
            .map(Some)
    }
}
