//! What the analyser says about one command ([`Verdict`]: class,
//! understood, reasons) and the judge's own state ([`Judge`]; its methods
//! are in `judge`). A leaf shared by `judge`, `programs`, `parse` and `git`.

use crate::class_kind::Class;

/// The judgement of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub class: Class,
    pub understood: bool,
    /// Worst first.
    pub reasons: Vec<String>,
    /// Why it is not fully understood (empty when it is).
    pub unclear: Vec<String>,
    /// The program is an interpreter running a script: understood, but no
    /// prefix rule is offered for it.
    pub interpreter: bool,
    /// The files it writes, as written (relative to the shell's folder).
    pub writes: Vec<String>,
}

impl Verdict {
    pub fn new(class: Class, reason: String) -> Self {
        Self {
            class,
            understood: true,
            reasons: vec![reason],
            unclear: Vec::new(),
            interpreter: false,
            writes: Vec::new(),
        }
    }

    /// Records that the command writes `path`.
    pub fn writing(mut self, path: &str) -> Self {
        self.writes.push(path.to_owned());
        self
    }

    pub fn read(name: &str) -> Self {
        Self::new(Class::Read, format!("`{name}` only reads"))
    }

    /// Marks the command not fully understood, at least `floor`.
    pub fn unclear(mut self, floor: Class, reason: String) -> Self {
        self.unclear.push(reason.clone());
        if floor > self.class {
            self.reasons.insert(0, reason);
        } else {
            self.reasons.push(reason);
        }
        self.class = self.class.max(floor);
        self.understood = false;
        self
    }

    /// The worse of two judgements of parts of one command.
    pub fn worst(mut self, other: Verdict) -> Self {
        if other.class > self.class {
            let mut reasons = other.reasons;
            reasons.append(&mut self.reasons);
            self.reasons = reasons;
        } else {
            self.reasons.extend(other.reasons);
        }
        self.class = self.class.max(other.class);
        self.understood &= other.understood;
        self.unclear.extend(other.unclear);
        self.interpreter |= other.interpreter;
        self.writes.extend(other.writes);
        self
    }
}

/// Judges commands; `depth` counts nested code strings and wrappers.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Judge {
    pub depth: usize,
}
