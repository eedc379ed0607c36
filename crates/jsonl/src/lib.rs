//! Strict NDJSON framing for keel's stdio protocols.
//!
//! This crate owns the bytes-to-frames layer: a frame is one line ending in
//! LF (a CR before the LF is tolerated and removed), at most
//! `max_frame_bytes` long. [`FrameReader`] splits an `AsyncRead` into frames;
//! a line longer than the limit is skipped to its end and reported once as
//! [`Error::Oversize`], and the frames after it parse normally. Blank lines
//! are not frames and are skipped. [`FrameWriter`] writes one JSON value per
//! line, at most [`MAX_OUT_FRAME_BYTES`] long. [`spawn_reader`] and [`spawn_writer`] run them as tasks behind
//! bounded channels, so protocol code deals in whole frames only.
//! [`parse_object`] reads one frame's top-level object strictly (a key
//! given twice is refused), for both front-ends.
//!
//! It must not know what a frame means: no command types, no RPC semantics
//! (the `rpc` crate parses the bytes of each frame).

mod error;
mod object;
mod reader;
mod writer;

pub use error::{Error, Result};
pub use object::{Object, ObjectError, kind_of, parse_object};
pub use reader::{FrameReader, ReadItem, spawn_reader};
pub use writer::{FrameSender, FrameWriter, spawn_writer};

/// Default limit on one inbound frame, in bytes (without the line ending).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;
/// Limit on one frame keel writes, in bytes (without the LF). A larger
/// frame is refused with [`Error::OversizeOut`] before anything is written,
/// so a host never has to hold a line of unbounded size; the protocol layer
/// answers a response that would be larger with an error instead.
pub const MAX_OUT_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Capacity of the channel between the reader task and its consumer.
pub const READ_CHANNEL_CAPACITY: usize = 64;
/// Capacity of the channel into the writer task. A host that stops reading
/// stdout applies back-pressure to the senders rather than growing memory.
pub const WRITE_CHANNEL_CAPACITY: usize = 1024;
