//! HTTP plumbing shared by the SSE dialects.
//!
//! This module owns sending a streaming request (with the header timeout and
//! cancellation), turning non-success answers into typed [`Error`]s, and
//! pumping an SSE body into a [`ModelStream`] with the idle timeout and
//! cancellation applied to every read. It does not know any dialect's JSON:
//! a dialect plugs in an [`SseDecoder`] that maps SSE events to
//! [`ModelEvent`]s.
//!
//! It also owns what every dialect's provider shares around that: building
//! the request headers (the credential header marked sensitive, extra headers
//! replacing defaults) and [`SseEndpoint`], one POST-and-stream target with
//! its timeouts, so a dialect module only builds a body and a decoder.
//!
//! Dropping the returned stream, cancelling, timing out or finishing drops
//! the response, which closes the connection.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
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

/// How a provider presents its API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// `Authorization: Bearer <key>` (OpenAI and compatibles).
    Bearer,
    /// The key as the whole value of this header (`x-api-key` for Anthropic).
    Header(&'static str),
}

/// The headers of every request of one provider: `accept:
/// text/event-stream`, the key (when set and non-empty) as `auth` says,
/// `defaults`, then `extra` (which replace headers of the same name). The key
/// and extra values are marked sensitive; errors name the provider and the
/// header, never a value.
pub(crate) fn build_headers(
    provider: &str,
    api_key: Option<&str>,
    auth: Auth,
    defaults: &[(&'static str, &str)],
    extra: &[(String, String)],
) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        let (name, value) = match auth {
            Auth::Bearer => (AUTHORIZATION, format!("Bearer {key}")),
            Auth::Header(name) => (HeaderName::from_static(name), key.to_owned()),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            Error::new(
                ErrorKind::BadRequest,
                format!(
                    "the API key of provider {provider} contains characters not allowed in a header"
                ),
            )
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let defaults = defaults.iter().map(|(n, v)| (*n, *v));
    let extra = extra.iter().map(|(n, v)| (n.as_str(), v.as_str()));
    for (name, value) in defaults.chain(extra) {
        let invalid = || {
            Error::new(
                ErrorKind::BadRequest,
                format!("invalid extra header {name:?} for provider {provider}"),
            )
        };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        let mut value = HeaderValue::from_str(value).map_err(|_| invalid())?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    Ok(headers)
}

/// One streaming endpoint: where to POST, with which headers and timeouts.
#[derive(Debug, Clone)]
pub(crate) struct SseEndpoint {
    pub client: reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
}

impl SseEndpoint {
    /// POSTs `body` as JSON and streams the SSE answer through `decoder`.
    pub(crate) async fn stream<D: SseDecoder, B: serde::Serialize + Sync + ?Sized>(
        &self,
        body: &B,
        decoder: D,
        cancel: CancellationToken,
    ) -> Result<ModelStream> {
        let builder = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .json(body);
        let response = send(
            builder,
            &self.url,
            self.request_timeout,
            self.idle_timeout,
            &cancel,
        )
        .await?;
        Ok(sse_stream(
            response,
            decoder,
            self.idle_timeout,
            cancel,
            &self.url,
        ))
    }
}

/// Parses the JSON `data` of an SSE event; garbage is a
/// [`ErrorKind::Decode`] error quoting at most 200 characters of it.
pub(crate) fn parse_json_data(data: &str, url: &str) -> Result<Value> {
    serde_json::from_str(data).map_err(|e| {
        let shown: String = data.chars().take(200).collect();
        Error::new(
            ErrorKind::Decode,
            format!("invalid JSON event from {url}: {e}: {shown}"),
        )
    })
}

/// The [`ErrorKind::StreamCut`] error for a body that ended (cleanly, or
/// mid-event) before the response was complete.
pub(crate) fn cut_error(url: &str, mid_event: bool) -> Error {
    let how = if mid_event { " mid-event" } else { "" };
    Error::new(
        ErrorKind::StreamCut,
        format!("stream from {url} ended{how} before the response finished"),
    )
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
                    if self.parser.overflowed() && !self.finished {
                        self.body = None;
                        let msg = format!(
                            "one event from {} is larger than {} MiB, the most keel takes in one event; the response was stopped",
                            self.url,
                            crate::sse::MAX_EVENT_BYTES / (1024 * 1024)
                        );
                        return Some(self.terminate(Err(Error::new(ErrorKind::Decode, msg))));
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

/// Test helper: runs `decoder` over `chunks` the way the pump does (SSE
/// parsing across chunk boundaries, stop at the first terminal item, the
/// end-of-body callback when the body ends first).
#[cfg(test)]
pub(crate) fn decode_chunks<D: SseDecoder>(
    mut decoder: D,
    chunks: &[&[u8]],
) -> Vec<Result<ModelEvent>> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    let push = |out: &mut Vec<Result<ModelEvent>>, result: Result<Vec<ModelEvent>>| -> bool {
        match result {
            Ok(events) => {
                for event in events {
                    let terminal = matches!(event, ModelEvent::Finish { .. });
                    out.push(Ok(event));
                    if terminal {
                        return true;
                    }
                }
                false
            }
            Err(e) => {
                out.push(Err(e));
                true
            }
        }
    };
    for chunk in chunks {
        for event in parser.push(chunk) {
            let result = decoder.on_event(event);
            if push(&mut out, result) {
                return out;
            }
        }
    }
    let result = decoder.on_end(parser.is_mid_event());
    push(&mut out, result);
    out
}
