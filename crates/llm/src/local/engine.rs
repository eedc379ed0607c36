//! The llama.cpp thread behind a [`super::LocalProvider`].
//!
//! One [`Engine`] owns one model file on one dedicated OS thread (never an
//! async worker): it loads the model when the first [`Job`] arrives, keeps
//! one context (and so one KV cache) for its lifetime, and runs jobs one
//! at a time. For each job it renders the prompt, reuses the longest
//! common token prefix with what the cache already holds, evaluates the
//! rest in batches, then samples tokens (through the tool grammar, when
//! there are tools) and sends [`ModelEvent`]s on the job's channel. The
//! first message of every job is either `Start` or the error that stopped
//! it before generation. A failed load fails every later job with the same
//! error. Before it creates the context it picks the threads (unless
//! configured) and checks that the context fits the model and the free
//! memory ([`super::resources`]). The thread ends when the last [`Engine`]
//! handle is dropped.

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::mpsc as std_mpsc;
use std::time::Instant;

use keel_protocol::{StopReason, Usage};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::LocalSpec;
use super::grammar::text_grammar;
use super::grammar::{GrammarMode, tool_grammar};
use super::kv::PrefixCache;
use super::parse::{OutputSplitter, ParsedCall, Piece, is_repeat};
use super::prompt_cache::PromptStore;
use super::resources::{self, ModelShape};
use super::sampler::Sampler;
use super::template::{ChatTemplate, split_run_facts, template_messages, template_messages_split};
use super::unescape::Unescape;
use crate::{Error, ErrorKind, ModelEvent, ModelRequest, Result};

/// Prompt tokens evaluated per `decode` call: cancellation is checked
/// between batches.
const PROMPT_BATCH: usize = 128;

/// The text-only grammar, built once.
static TEXT_ONLY: std::sync::LazyLock<String> = std::sync::LazyLock::new(text_grammar);

/// What the model reads when it asked again for a call whose result it
/// already has: answer now, in words. It repeats the request (a small
/// model that is only told it has the results answers that it called
/// nothing) and names what the answer must hold.
fn answer_now(request: &ModelRequest) -> String {
    let asked = request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            keel_protocol::Message::User(u) => Some(keel_protocol::joined_text(&u.content)),
            _ => None,
        })
        .unwrap_or_default();
    format!(
        "The tool results above are all you need. My request was: {asked}\n\
         Answer it now in plain text, without calling a tool: say what you did, and give \
         the result I asked for (the number, the name, or what the command printed)."
    )
}

/// What one generation produced.
struct Attempt {
    input: u64,
    reused: u64,
    /// Tokens evaluated and saved to the prompt cache on disk.
    written: u64,
    generated: u64,
    total: u64,
    calls: Vec<ParsedCall>,
    stop: StopReason,
}

/// One model call for the engine thread.
pub(crate) struct Job {
    pub request: ModelRequest,
    pub events: mpsc::UnboundedSender<Result<ModelEvent>>,
    pub cancel: CancellationToken,
}

/// A handle on the engine thread; the thread ends when the last handle is
/// dropped.
pub(crate) struct Engine {
    jobs: std_mpsc::Sender<Job>,
}

impl Engine {
    /// Starts the thread (the model is loaded by the first job).
    pub fn spawn(spec: LocalSpec) -> Result<Engine> {
        let (jobs, rx) = std_mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("keel-local-model".into())
            .spawn(move || thread_main(spec, rx))
            .map_err(|e| {
                Error::new(
                    ErrorKind::Other,
                    format!("cannot start the model thread: {e}"),
                )
            })?;
        Ok(Engine { jobs })
    }

    /// Queues `job`.
    pub fn submit(&self, job: Job) -> Result<()> {
        self.jobs
            .send(job)
            .map_err(|_| Error::new(ErrorKind::Other, "the local model thread has stopped"))
    }
}

/// The process-wide llama.cpp backend (it may be initialised only once).
fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            Error::new(
                ErrorKind::Other,
                format!("cannot initialise llama.cpp: {e}"),
            )
        })
}

fn thread_main(spec: LocalSpec, rx: std_mpsc::Receiver<Job>) {
    // Nothing is loaded until someone asks.
    let Ok(first) = rx.recv() else { return };
    let loaded = backend().and_then(|b| load(b, &spec).map(|(m, t)| (b, m, t)));
    let (backend, model, template) = match loaded {
        Ok(l) => l,
        Err(e) => return fail_all(e, first, rx),
    };
    let n_threads = match spec.threads.filter(|t| *t > 0) {
        Some(t) => t,
        None => {
            let (t, busy) = resources::threads_now();
            tracing::info!(
                threads = t,
                busy_cores_elsewhere = busy,
                "local model threads (set [providers.local] threads or --threads to fix them)"
            );
            t
        }
    } as i32;
    let shape = ModelShape {
        layers: model.n_layer(),
        embedding: u32::try_from(model.n_embd()).unwrap_or(0),
        heads: model.n_head(),
        kv_heads: model.n_head_kv(),
        train_context: model.n_ctx_train(),
    };
    let context_size = spec.context_size.max(256);
    if let Err(message) = resources::check_context(&shape, context_size, resources::mem_available())
    {
        let err = Error::new(
            ErrorKind::Other,
            format!("{}: {message}", spec.model_path.display()),
        );
        return fail_all(err, first, rx);
    }
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(context_size))
        .with_n_batch(512)
        .with_n_threads(n_threads)
        .with_n_threads_batch(n_threads);
    let ctx = match model.new_context(backend, params) {
        Ok(c) => c,
        Err(e) => {
            let err = Error::new(
                ErrorKind::Other,
                format!(
                    "cannot allocate a {context_size}-token context for {} ({e}): out of memory? lower [providers.local] context_size",
                    spec.model_path.display()
                ),
            );
            return fail_all(err, first, rx);
        }
    };
    let store = spec.prompt_cache.as_ref().and_then(|root| {
        PromptStore::open(
            root,
            &spec.model_path,
            context_size,
            spec.prompt_cache_limit,
        )
    });
    let mut engine = Loaded {
        spec: &spec,
        model: &model,
        template,
        ctx,
        cache: PrefixCache::default(),
        store,
    };
    let mut job = first;
    loop {
        engine.run(job);
        match rx.recv() {
            Ok(next) => job = next,
            Err(_) => break,
        }
    }
}

fn fail_all(err: Error, first: Job, rx: std_mpsc::Receiver<Job>) {
    tracing::error!(error = %err, "local model unavailable");
    let _ = first.events.send(Err(err.clone()));
    for job in rx {
        let _ = job.events.send(Err(err.clone()));
    }
}

/// Loads the model and its chat template, with clear errors for a missing
/// or foreign file, a model without a chat template, and too little memory.
fn load(backend: &LlamaBackend, spec: &LocalSpec) -> Result<(LlamaModel, ChatTemplate)> {
    let path = spec.model_path.as_path();
    check_gguf(path)?;
    check_memory(path)?;
    let started = Instant::now();
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()).map_err(
        |e| {
            Error::new(
                ErrorKind::Other,
                format!(
                    "llama.cpp could not load {} ({e}): the file may be damaged (run `keel models pull` again), of an unsupported architecture, or too big for the free memory",
                    path.display()
                ),
            )
        },
    )?;
    let source = model
        .chat_template(None)
        .ok()
        .and_then(|t| t.to_string().ok())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::BadRequest,
                format!(
                    "{} is not a chat model: its GGUF has no chat template (tokenizer.chat_template); use an instruct/chat GGUF",
                    path.display()
                ),
            )
        })?;
    let vocab = model.vocab();
    let token_text =
        |t: LlamaToken| String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned();
    let template = ChatTemplate::new(&source, token_text(vocab.bos()), token_text(vocab.eos()))
        .map_err(|e| {
            Error::new(
                ErrorKind::BadRequest,
                format!("{}: cannot use its {e}", path.display()),
            )
        })?;
    tracing::info!(
        model = %path.display(),
        secs = started.elapsed().as_secs_f64(),
        params = model.n_params(),
        train_ctx = model.n_ctx_train(),
        "local model loaded"
    );
    Ok((model, template))
}

/// The file exists and starts with the GGUF magic.
pub(crate) fn check_gguf(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let opened = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    match opened {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(missing_model(path)),
        Err(e) => Err(Error::new(
            ErrorKind::ModelNotFound,
            format!("cannot read model file {}: {e}", path.display()),
        )),
        Ok(()) if &magic != b"GGUF" => Err(Error::new(
            ErrorKind::BadRequest,
            format!("{} is not a GGUF model file", path.display()),
        )),
        Ok(()) => Ok(()),
    }
}

/// The error for a model file that is not there.
pub(crate) fn missing_model(path: &Path) -> Error {
    Error::new(
        ErrorKind::ModelNotFound,
        format!(
            "model file {} not found: run `keel models pull` (or set [providers.local] model_path / --model-path)",
            path.display()
        ),
    )
}

/// Fails early when the weights clearly do not fit in the memory
/// available now (the context is checked once the model is loaded).
fn check_memory(path: &Path) -> Result<()> {
    let file = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    resources::check_weights(file, resources::mem_available())
        .map_err(|message| Error::new(ErrorKind::Other, format!("{}: {message}", path.display())))
}

/// A loaded model with its context and what the KV cache holds.
pub(super) struct Loaded<'m> {
    spec: &'m LocalSpec,
    pub(super) model: &'m LlamaModel,
    template: ChatTemplate,
    pub(super) ctx: LlamaContext<'m>,
    /// The tokens whose keys and values are in the cache, and their text.
    pub(super) cache: PrefixCache<LlamaToken>,
    /// Evaluated prompts on disk, when configured.
    store: Option<PromptStore>,
}

impl Loaded<'_> {
    fn run(&mut self, job: Job) {
        let Job {
            request,
            events,
            cancel,
        } = job;
        if cancel.is_cancelled() || events.is_closed() {
            let _ = events.send(Err(Error::cancelled()));
            return;
        }
        if let Err(e) = self.generate(&request, &events, &cancel) {
            if e.kind != ErrorKind::Cancelled {
                tracing::warn!(error = %e, "local model call failed");
            }
            let _ = events.send(Err(e));
        }
    }

    fn generate(
        &mut self,
        request: &ModelRequest,
        events: &mpsc::UnboundedSender<Result<ModelEvent>>,
        cancel: &CancellationToken,
    ) -> Result<()> {
        // The run's facts (date, workspace) go after the tools when the
        // chat template takes a second system turn; else as they are.
        let split =
            template_messages_split(&request.system_prompt, &request.messages).and_then(|m| {
                let p = self.template.render(&m, &request.tools, true).ok()?;
                Some((m, p, split_run_facts(&request.system_prompt).0))
            });
        let (mut messages, mut prompt, fixed_system) = match split {
            Some(s) => s,
            None => {
                let m = template_messages(&request.system_prompt, &request.messages);
                let p = self
                    .template
                    .render(&m, &request.tools, true)
                    .map_err(|e| Error::new(ErrorKind::BadRequest, e.to_string()))?;
                (m, p, request.system_prompt.as_str())
            }
        };
        tracing::trace!(%prompt, "local model prompt");
        let after_user = matches!(
            request.messages.last(),
            Some(keel_protocol::Message::User(_))
        );
        let mut grammar = tool_grammar(&request.tools, self.spec.grammar, after_user);
        // The part of every prompt of this system prompt and tool set (the
        // chat template's system turn): what the prompt cache keeps.
        let fixed = self
            .template
            .render(&template_messages(fixed_system, &[]), &request.tools, false)
            .ok()
            .filter(|f| !f.is_empty() && prompt.starts_with(f.as_str()));
        let mut usage = Usage::default();
        let mut started = false;
        loop {
            let out = self.attempt(
                &prompt,
                fixed.as_deref(),
                request,
                grammar.as_deref(),
                events,
                cancel,
                &mut started,
            )?;
            usage.input += out.input;
            usage.cache_read = usage.cache_read.max(out.reused);
            usage.output += out.generated;
            usage.cache_write += out.written;
            usage.total_tokens = out.total;
            // A call the model already has the result of, asked for again
            // (see `is_repeat`): make it answer in text instead (once). The
            // grammar alone leaves a small model lost (it tends to refuse);
            // a note after the results says what is wanted. The note is
            // part of this call's prompt only, never of the session.
            let fresh: Vec<ParsedCall> = out
                .calls
                .iter()
                .filter(|c| !is_repeat(c, &request.messages))
                .cloned()
                .collect();
            if !out.calls.is_empty()
                && fresh.is_empty()
                && grammar.as_deref() != Some(TEXT_ONLY.as_str())
            {
                tracing::info!(
                    calls = out.calls.len(),
                    "local model repeated a call; asking for an answer"
                );
                messages.push(serde_json::json!({"role": "user", "content": answer_now(request)}));
                prompt = self
                    .template
                    .render(&messages, &request.tools, true)
                    .map_err(|e| Error::new(ErrorKind::BadRequest, e.to_string()))?;
                grammar = Some(TEXT_ONLY.clone());
                continue;
            }
            let stop = if fresh.is_empty() {
                out.stop
            } else {
                StopReason::ToolUse
            };
            if fresh.is_empty()
                && stop == StopReason::Stop
                && let Some(store) = self.store.clone()
            {
                self.save_conversation(&store);
            }
            send_calls(events, fresh);
            let _ = events.send(Ok(ModelEvent::Usage(usage)));
            let _ = events.send(Ok(ModelEvent::Finish { stop_reason: stop }));
            return Ok(());
        }
    }

    /// One generation for `prompt`: text is sent as it comes, calls are
    /// returned. Sends `Start` first unless `started`.
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        &mut self,
        prompt: &str,
        fixed: Option<&str>,
        request: &ModelRequest,
        grammar: Option<&str>,
        events: &mpsc::UnboundedSender<Result<ModelEvent>>,
        cancel: &CancellationToken,
        started: &mut bool,
    ) -> Result<Attempt> {
        // A fresh context starts from the prompt saved on disk that shares
        // the longest start with this one; when the fixed part (system
        // prompt and tools) is not saved, it is evaluated first and saved
        // for the processes after this one.
        let mut written = 0;
        if self.cache.len() == 0
            && let Some(store) = self.store.clone()
        {
            self.restore(&store, prompt);
            if let Some(fixed) = fixed
                && !store.has(fixed.as_bytes())
            {
                written = self.warm(&store, fixed, cancel)?;
            }
        }
        // Keep what the cache already holds of this prompt; tokenize the rest.
        let (mut reused, mut start) = self.cache.plan(prompt.as_bytes());
        if !self.keep(reused) {
            (reused, start) = (0, 0);
        }
        let suffix = &prompt.as_bytes()[start..];
        let tokens = self.model.vocab().tokenize(suffix, false, true);
        let prompt_tokens = reused + tokens.len();
        let n_ctx = self.ctx.n_ctx() as usize;
        if prompt_tokens + 16 > n_ctx {
            return Err(Error::new(
                ErrorKind::ContextWindowExceeded,
                format!(
                    "the prompt is {prompt_tokens} tokens but the local model's context is {n_ctx} (raise [providers.local] context_size)"
                ),
            ));
        }
        let mut sampler = Sampler::new(self.model, grammar, self.spec.temperature, self.spec.seed)?;
        if !*started {
            *started = true;
            let _ = events.send(Ok(ModelEvent::Start { response_id: None }));
        }

        // Prompt: keep the common prefix, evaluate the rest.
        let prefill_started = Instant::now();
        let pieces = self.pieces(&tokens);
        self.eval(&tokens, cancel)?;
        self.cache.push(&tokens, &pieces, suffix);
        let prefill = prefill_started.elapsed();

        // Generation.
        let tool_names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let mut splitter = OutputSplitter::new(&tool_names, self.spec.grammar == GrammarMode::Off);
        let limit = request
            .max_output_tokens
            .map_or(super::DEFAULT_MAX_OUTPUT_TOKENS as usize, |n| n as usize)
            .min(n_ctx.saturating_sub(self.cache.len()));
        let vocab = self.model.vocab();
        let mut bytes: Vec<u8> = Vec::new();
        let mut generated = 0usize;
        let mut stop = StopReason::Length;
        let mut calls = Vec::new();
        let mut unescape = Unescape::default();
        let mut take = |pieces: Vec<Piece>| {
            for piece in pieces {
                match piece {
                    Piece::Text(t) => {
                        let t = unescape.push(&t);
                        if !t.is_empty() {
                            let _ = events.send(Ok(ModelEvent::TextDelta(t)));
                        }
                    }
                    Piece::Call(c) => calls.push(c),
                }
            }
        };
        let gen_started = Instant::now();
        while generated < limit {
            if cancel.is_cancelled() || events.is_closed() {
                return Err(Error::cancelled());
            }
            let token = sampler.sample(&self.ctx);
            if vocab.is_eog(token) {
                stop = StopReason::Stop;
                break;
            }
            generated += 1;
            let piece = vocab.token_to_piece(token, true, None);
            bytes.extend_from_slice(&piece);
            let text = take_utf8(&mut bytes);
            if !text.is_empty() {
                take(splitter.push(&text));
            }
            if generated < limit {
                self.eval(&[token], cancel)?;
                self.cache
                    .push(&[token], std::slice::from_ref(&piece), &piece);
            }
        }
        if !bytes.is_empty() {
            take(splitter.push(&String::from_utf8_lossy(&bytes)));
        }
        take(splitter.finish());
        let held = unescape.finish();
        if !held.is_empty() {
            let _ = events.send(Ok(ModelEvent::TextDelta(held)));
        }
        let gen_time = gen_started.elapsed();
        tracing::info!(
            prompt_tokens,
            reused,
            evaluated = tokens.len(),
            prefill_secs = prefill.as_secs_f64(),
            prefill_tok_s = rate(tokens.len(), prefill.as_secs_f64()),
            generated,
            gen_secs = gen_time.as_secs_f64(),
            gen_tok_s = rate(generated, gen_time.as_secs_f64()),
            grammar = grammar.is_some(),
            "local model call"
        );
        Ok(Attempt {
            input: (tokens.len() + written) as u64,
            reused: reused.saturating_sub(written) as u64,
            written: written as u64,
            generated: generated as u64,
            total: (prompt_tokens + generated) as u64,
            calls,
            stop,
        })
    }

    /// Drops everything from the KV cache after its first `k` tokens
    /// (also what an interrupted evaluation left there). `false` when the
    /// model cannot cut its cache and all of it was dropped.
    pub(super) fn keep(&mut self, k: usize) -> bool {
        let removed = self
            .ctx
            .clear_kv_cache_seq(Some(0), Some(k as u32), None)
            .unwrap_or(false);
        if removed {
            self.cache.truncate(k);
        } else {
            self.ctx.clear_kv_cache();
            self.cache.clear();
        }
        removed || k == 0
    }

    /// Evaluates `tokens` after the cache, in batches; logits are kept for
    /// the last one.
    pub(super) fn eval(&mut self, tokens: &[LlamaToken], cancel: &CancellationToken) -> Result<()> {
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        let n = tokens.len();
        let base = self.cache.len();
        for (c, chunk) in tokens.chunks(PROMPT_BATCH).enumerate() {
            if cancel.is_cancelled() {
                return Err(Error::cancelled());
            }
            batch.clear();
            for (i, token) in chunk.iter().enumerate() {
                let at = c * PROMPT_BATCH + i;
                let pos = (base + at) as i32;
                let is_last = at + 1 == n;
                batch
                    .add(*token, pos, &[0], is_last)
                    .map_err(|e| Error::new(ErrorKind::Other, format!("local model batch: {e}")))?;
            }
            self.ctx.decode(&mut batch).map_err(|e| {
                Error::new(
                    ErrorKind::Other,
                    format!("local model evaluation failed ({e}): out of memory or context full"),
                )
            })?;
        }
        Ok(())
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

/// The longest valid UTF-8 prefix of `bytes`, removed from it (an
/// incomplete character at the end waits for the next token; invalid
/// bytes become U+FFFD).
fn take_utf8(bytes: &mut Vec<u8>) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => {
            let s = s.to_owned();
            bytes.clear();
            s
        }
        Err(e) if e.error_len().is_none() => {
            let valid = e.valid_up_to();
            let s = String::from_utf8_lossy(&bytes[..valid]).into_owned();
            bytes.drain(..valid);
            s
        }
        Err(_) => {
            let s = String::from_utf8_lossy(bytes).into_owned();
            bytes.clear();
            s
        }
    }
}

/// Sends `calls` as tool call events (start, then the whole arguments).
fn send_calls(events: &mpsc::UnboundedSender<Result<ModelEvent>>, calls: Vec<ParsedCall>) {
    for (index, call) in (0u32..).zip(calls) {
        let _ = events.send(Ok(ModelEvent::ToolCallStart {
            index,
            id: call_id(),
            name: call.name,
        }));
        let _ = events.send(Ok(ModelEvent::ToolCallDelta {
            index,
            delta: call.arguments.to_string(),
        }));
    }
}

/// A process-unique tool call id.
fn call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "call_{nanos:08x}{:04x}",
        N.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}
