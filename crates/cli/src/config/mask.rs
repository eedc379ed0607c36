//! How `keel config show` prints secrets: masked, never whole.

/// `sk-abc…wxyz` → `sk-a…wxyz (N chars)`; short keys are fully hidden.
pub fn mask(secret: &str) -> String {
    let n = secret.chars().count();
    if n < 12 {
        return format!("*** ({n} chars)");
    }
    let head: String = secret.chars().take(4).collect();
    let tail: String = secret.chars().skip(n - 4).collect();
    format!("{head}…{tail} ({n} chars)")
}

/// A header value as `config show` prints it: masked when the name looks
/// like a credential.
pub fn mask_header(name: &str, value: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if lower.contains("auth")
        || lower.contains("key")
        || lower.contains("token")
        || lower.contains("secret")
    {
        mask(value)
    } else {
        value.to_owned()
    }
}
