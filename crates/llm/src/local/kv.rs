//! What the KV cache holds, and how much of it a new prompt can reuse.
//!
//! [`PrefixCache`] mirrors the llama.cpp context's KV cache: the tokens in
//! it and the text they encode. A new prompt keeps the longest run of
//! cached tokens whose text is a prefix of the new prompt's text
//! ([`PrefixCache::plan`]); only the rest is tokenized and evaluated. The
//! comparison is by text, not by token ids, because a call the grammar
//! forced out character by character (`<`, `tool`, `_call`, `>`) re-renders
//! as the same text but tokenizes differently (`<tool_call>` is one special
//! token): comparing tokens would throw away the whole answer each turn.
//! It does no I/O and knows nothing of llama.cpp (tokens are any `Copy`).
#![cfg_attr(not(feature = "local"), allow(dead_code))]

/// The end of a token whose own text is not known (only the end of its
/// segment is a place to cut).
const INEXACT: usize = usize::MAX;

/// The tokens in the KV cache and the text they encode.
#[derive(Debug, Clone)]
pub(crate) struct PrefixCache<T> {
    tokens: Vec<T>,
    /// `ends[i]`: the length of the text encoded by `tokens[..=i]`, or
    /// [`INEXACT`].
    ends: Vec<usize>,
    text: Vec<u8>,
}

impl<T: Copy> Default for PrefixCache<T> {
    fn default() -> Self {
        PrefixCache {
            tokens: Vec::new(),
            ends: Vec::new(),
            text: Vec::new(),
        }
    }
}

impl<T: Copy> PrefixCache<T> {
    /// Number of cached tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The cached text.
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// The cached tokens.
    pub fn tokens(&self) -> &[T] {
        &self.tokens
    }

    /// How many cached tokens to keep for `prompt`, and how many bytes of
    /// `prompt` they cover. At least one byte of `prompt` is left to
    /// evaluate (the model needs a fresh last token for its logits).
    pub fn plan(&self, prompt: &[u8]) -> (usize, usize) {
        let common = self
            .text
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let mut k = self.tokens.len();
        while k > 0 {
            let end = self.ends[k - 1];
            if end != INEXACT && end <= common && end < prompt.len() {
                return (k, end);
            }
            k -= 1;
        }
        (0, 0)
    }

    /// Keeps the first `k` tokens (`k` from [`PrefixCache::plan`]).
    pub fn truncate(&mut self, k: usize) {
        let bytes = if k == 0 { 0 } else { self.ends[k - 1] };
        debug_assert!(bytes != INEXACT);
        self.tokens.truncate(k);
        self.ends.truncate(k);
        self.text.truncate(bytes);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Appends `tokens`, which encode `text`; `pieces[i]` is the text of
    /// `tokens[i]`. When the pieces do not add up to `text`, only the end
    /// of the whole run is a place to cut.
    pub fn push(&mut self, tokens: &[T], pieces: &[Vec<u8>], text: &[u8]) {
        let start = self.text.len();
        let exact = pieces.len() == tokens.len()
            && pieces.iter().map(Vec::len).sum::<usize>() == text.len()
            && pieces.concat() == text;
        let mut end = start;
        for (i, token) in tokens.iter().enumerate() {
            self.tokens.push(*token);
            if exact {
                end += pieces[i].len();
                self.ends.push(end);
            } else if i + 1 == tokens.len() {
                self.ends.push(start + text.len());
            } else {
                self.ends.push(INEXACT);
            }
        }
        self.text.extend_from_slice(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn keeps_the_longest_text_prefix_and_leaves_something_to_evaluate() {
        let mut c = PrefixCache::<u32>::default();
        assert_eq!(c.plan(b"anything"), (0, 0));
        c.push(&[1, 2, 3], &pieces(&["<s>", "hi", "\n"]), b"<s>hi\n");
        // Generated character by character.
        c.push(&[4, 5], &pieces(&["<", "tc>"]), b"<tc>");
        assert_eq!(c.len(), 5);
        assert_eq!(c.text(), b"<s>hi\n<tc>");
        // The next prompt extends the text: everything is kept.
        assert_eq!(c.plan(b"<s>hi\n<tc></end>"), (5, 10));
        // It diverges inside token 2: tokens 0..1 are kept.
        assert_eq!(c.plan(b"<s>ho"), (1, 3));
        // The same prompt again: the last token is evaluated again.
        assert_eq!(c.plan(b"<s>hi\n<tc>"), (4, 7));
        c.truncate(2);
        assert_eq!(c.text(), b"<s>hi");
        c.clear();
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn inexact_runs_are_cut_only_at_their_end() {
        let mut c = PrefixCache::<u32>::default();
        // Pieces that do not add up (a tokenizer that adds a space).
        c.push(&[1, 2], &pieces(&[" a", " b"]), b"a b");
        c.push(&[3], &pieces(&["!"]), b"!");
        assert_eq!(c.plan(b"a b!?"), (3, 4));
        assert_eq!(c.plan(b"a b?"), (2, 3));
        assert_eq!(c.plan(b"a c"), (0, 0));
    }
}
