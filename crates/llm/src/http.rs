//! HTTP plumbing shared by the SSE dialects.
//!
//! This module owns sending a streaming request (with the header timeout and
//! cancellation), turning non-success answers into typed [`Error`]s, and
//! pumping an SSE body into a [`ModelStream`] with the idle timeout and
//! cancellation applied to every read. It does not know any dialect's JSON:
//! a dialect plugs in an [`SseDecoder`] that maps SSE events to
//! [`ModelEvent`]s.
//!
//! Dropping the returned stream, cancelling, timing out or finishing drops
//! the response, which closes the connection.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use crate::error::redact_url;
use crate::sse::{SseEvent, SseParser};
use crate::{Error, ErrorKind, ModelEvent, ModelStream, Result};

/// At most this much of an error body is read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Builds the HTTP client the providers share: rustls, HTTP/1.1 and HTTP/2,
/// this connect timeout, no overall timeout (streams are bounded by the idle
/// timeout instead).
pub fn build_client(connect_timeout: Duration) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| {
            Error::new(
                ErrorKind::Other,
                format!(
                    "cannot build the HTTP client: {}",
                    crate::error::error_chain(&e)
                ),
            )
        })
}

/// Sends `request` and waits for the response headers, at most
/// `request_timeout`, giving up as soon as `cancel` fires. A non-success
/// status becomes an error built from the status, headers and (capped) body.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    url: &str,
    request_timeout: Duration,
    idle_timeout: Duration,
    cancel: &CancellationToken,
) -> Result<reqwest::Response> {
    let sent = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Error::cancelled()),
        sent = tokio::time::timeout(request_timeout, request.send()) => sent,
    };
    let response = match sent {
        Err(_) => {
            return Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "no response from {} within {}s",
                    redact_url(url),
                    request_timeout.as_secs_f64()
                ),
            ));
        }
        Ok(Err(e)) => return Err(Error::from_transport(e, url)),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    let body = read_error_body(response, idle_timeout, cancel).await?;
    Err(Error::from_http(status.as_u16(), &headers, &body, url))
}

/// Reads up to [`MAX_ERROR_BODY_BYTES`] of an error body; a body that stalls
/// or breaks yields what arrived so far.
async fn read_error_body(
    response: reqwest::Response,
    idle_timeout: Duration,
    cancel: &CancellationToken,
) -> Result<String> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < MAX_ERROR_BODY_BYTES {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Error::cancelled()),
            next = tokio::time::timeout(idle_timeout, chunks.next()) => next,
        };
        match next {
            Ok(Some(Ok(bytes))) => body.extend_from_slice(&bytes),
            Ok(Some(Err(_)) | None) | Err(_) => break,
        }
    }
    body.truncate(MAX_ERROR_BODY_BYTES);
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Maps one dialect's SSE events to model events.
pub(crate) trait SseDecoder: Send + 'static {
    /// One dispatched SSE event. Return [`ModelEvent::Finish`] (last) when
    /// the response is complete; an error ends the stream.
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<ModelEvent>>;

    /// The body ended cleanly. `mid_event` tells whether a partial event was
    /// left in the parser. Return the final events (ending with `Finish`) or
    /// an error (usually [`ErrorKind::StreamCut`]).
    fn on_end(&mut self, mid_event: bool) -> Result<Vec<ModelEvent>>;

    /// Reading the body failed (`error` is a [`ErrorKind::StreamCut`]).
    /// Return final events instead if the response was already complete.
    fn on_body_error(&mut self, error: Error) -> Result<Vec<ModelEvent>> {
        Err(error)
    }
}

/// Turns an SSE response into a [`ModelStream`] driven by `decoder`.
pub(crate) fn sse_stream<D: SseDecoder>(
    response: reqwest::Response,
    decoder: D,
    idle_timeout: Duration,
    cancel: CancellationToken,
    url: &str,
) -> ModelStream {
    let pump = Pump {
        body: Some(response.bytes_stream().boxed()),
        parser: SseParser::new(),
        decoder,
        queue: VecDeque::new(),
        finished: false,
        cancel,
        idle_timeout,
        url: redact_url(url),
    };
    Box::pin(futures::stream::unfold(pump, |mut pump| async move {
        let item = pump.next().await?;
        Some((item, pump))
    }))
}

struct Pump<D> {
    /// `None` once the body has ended (or been dropped).
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    parser: SseParser,
    decoder: D,
    queue: VecDeque<Result<ModelEvent>>,
    /// A terminal item (`Finish` or an error) has been yielded.
    finished: bool,
    cancel: CancellationToken,
    idle_timeout: Duration,
    url: String,
}

fn is_terminal(item: &Result<ModelEvent>) -> bool {
    matches!(item, Err(_) | Ok(ModelEvent::Finish { .. }))
}

impl<D: SseDecoder> Pump<D> {
    async fn next(&mut self) -> Option<Result<ModelEvent>> {
        loop {
            if self.finished {
                return None;
            }
            if self.cancel.is_cancelled() {
                return Some(self.terminate(Err(Error::cancelled())));
            }
            if let Some(item) = self.queue.pop_front() {
                if is_terminal(&item) {
                    return Some(self.terminate(item));
                }
                return Some(item);
            }
            let Some(body) = self.body.as_mut() else {
                // The decoder let the body end without a terminal event.
                let msg = format!(
                    "stream from {} ended before the response finished",
                    self.url
                );
                return Some(self.terminate(Err(Error::new(ErrorKind::StreamCut, msg))));
            };
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => continue,
                next = tokio::time::timeout(self.idle_timeout, body.next()) => next,
            };
            match next {
                Err(_) => {
                    let msg = format!(
                        "no data from {} for {}s (idle timeout)",
                        self.url,
                        self.idle_timeout.as_secs_f64()
                    );
                    return Some(self.terminate(Err(Error::new(ErrorKind::Timeout, msg))));
                }
                Ok(Some(Ok(bytes))) => {
                    for event in self.parser.push(&bytes) {
                        let result = self.decoder.on_event(event);
                        if self.feed(result) {
                            break;
                        }
                    }
                }
                Ok(Some(Err(e))) => {
                    self.body = None;
                    let msg = format!(
                        "stream from {} broke before the response finished: {}",
                        self.url,
                        crate::error::error_chain(&e.without_url())
                    );
                    let cut = Error::new(ErrorKind::StreamCut, msg);
                    let result = self.decoder.on_body_error(cut);
                    self.feed(result);
                }
                Ok(None) => {
                    self.body = None;
                    let result = self.decoder.on_end(self.parser.is_mid_event());
                    self.feed(result);
                }
            }
        }
    }

    /// Queues a decoder result; returns whether it ended the response.
    fn feed(&mut self, result: Result<Vec<ModelEvent>>) -> bool {
        match result {
            Ok(events) => {
                for event in events {
                    let terminal = matches!(event, ModelEvent::Finish { .. });
                    self.queue.push_back(Ok(event));
                    if terminal {
                        return true;
                    }
                }
                false
            }
            Err(e) => {
                self.queue.push_back(Err(e));
                true
            }
        }
    }

    /// Marks the stream finished and releases the connection.
    fn terminate(&mut self, item: Result<ModelEvent>) -> Result<ModelEvent> {
        self.finished = true;
        self.queue.clear();
        self.body = None;
        item
    }
}
