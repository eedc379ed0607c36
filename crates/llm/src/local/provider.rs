//! [`LocalProvider`]: the [`Provider`] face of a local model.
//!
//! Providers for the same model file, context size and thread count share
//! one [`Engine`] (one loaded model, one KV cache), so several sessions in
//! one process do not load the weights twice; their requests run one at a
//! time. `stream` waits until the engine has rendered the prompt and
//! accepted the job, so setup errors (missing file, not a chat model,
//! prompt too long) come back from `stream` itself, not inside the stream.

use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::LocalSpec;
use super::engine::{Engine, Job, check_gguf};
use crate::{Error, ModelEvent, ModelRequest, ModelStream, Provider, Result};

/// A GGUF model run in-process (see the [module docs](super)).
pub struct LocalProvider {
    name: String,
    spec: LocalSpec,
    engine: Arc<Engine>,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("name", &self.name)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl LocalProvider {
    /// A provider for `spec`. Fails at once when the model file is missing
    /// or not a GGUF file; the model itself is loaded by the first request.
    pub fn new(name: impl Into<String>, spec: LocalSpec) -> Result<Self> {
        check_gguf(&spec.model_path)?;
        let engine = shared_engine(&spec)?;
        Ok(LocalProvider {
            name: name.into(),
            spec,
            engine,
        })
    }

    /// The settings this provider runs with.
    pub fn spec(&self) -> &LocalSpec {
        &self.spec
    }
}

/// The engine for `spec`, started if no live one serves the same file,
/// context size and threads.
fn shared_engine(spec: &LocalSpec) -> Result<Arc<Engine>> {
    type Key = (std::path::PathBuf, u32, Option<u32>);
    static ENGINES: Mutex<Vec<(Key, Weak<Engine>)>> = Mutex::new(Vec::new());
    let path = std::fs::canonicalize(&spec.model_path).unwrap_or_else(|_| spec.model_path.clone());
    let key = (path, spec.context_size, spec.threads.filter(|t| *t > 0));
    let mut engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    engines.retain(|(_, w)| w.strong_count() > 0);
    if let Some(engine) = engines
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(engine);
    }
    let engine = Arc::new(Engine::spawn(spec.clone())?);
    engines.push((key, Arc::downgrade(&engine)));
    Ok(engine)
}

#[async_trait::async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn api(&self) -> &str {
        super::API
    }

    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream> {
        tracing::debug!(
            provider = %self.name,
            model = %request.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "local model request"
        );
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.engine.submit(Job {
            request,
            events: tx,
            cancel: cancel.clone(),
        })?;
        // The first message says whether the job started.
        let first = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Error::cancelled()),
            first = rx.recv() => first,
        };
        let first = match first {
            Some(Ok(event)) => event,
            Some(Err(e)) => return Err(e),
            None => return Err(stopped()),
        };
        let rest = futures::stream::unfold(
            (rx, cancel, false),
            |(mut rx, cancel, done)| async move {
                if done {
                    return None;
                }
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => Some((Err(Error::cancelled()), (rx, cancel, true))),
                    next = rx.recv() => match next {
                        Some(Ok(ev @ ModelEvent::Finish { .. })) => Some((Ok(ev), (rx, cancel, true))),
                        Some(Err(e)) => Some((Err(e), (rx, cancel, true))),
                        Some(ev) => Some((ev, (rx, cancel, false))),
                        None => Some((Err(stopped()), (rx, cancel, true))),
                    },
                }
            },
        );
        Ok(futures::stream::once(async move { Ok(first) })
            .chain(rest)
            .boxed())
    }
}

fn stopped() -> Error {
    Error::new(
        crate::ErrorKind::StreamCut,
        "the local model stopped before finishing its answer",
    )
}
