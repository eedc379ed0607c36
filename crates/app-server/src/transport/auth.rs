//! Authentication of the network listeners (`ws://`, `unix://`).
//!
//! Two modes, as Codex's `--ws-auth` has them:
//!
//! - **capability token**: a shared secret read from `--ws-token-file`, or
//!   only its SHA-256 given with `--ws-token-sha256` (exactly one of the
//!   two). keel keeps the digest only; a presented token is hashed and the
//!   two digests are compared in constant time (`subtle`), so neither the
//!   token's bytes nor its length leak through timing.
//! - **signed bearer token**: an HS256 JWT checked by [`JwtVerifier`] with
//!   the secret from `--ws-shared-secret-file`, `--ws-issuer`,
//!   `--ws-audience` and `--ws-max-clock-skew-seconds`.
//!
//! Either way the token is accepted **only** from the `Authorization:
//! Bearer …` header of the upgrade request; query strings, cookies and
//! subprotocol headers are never looked at. Without a mode a listener does
//! not start, unless `--ws-insecure-no-auth` was given and the listener is
//! loopback or a unix socket (checked when binding). Secrets never appear
//! in `Debug` output or logs.

use std::path::{Path, PathBuf};

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::jwt::{DEFAULT_MAX_CLOCK_SKEW_SECS, JwtError, JwtVerifier};
use crate::error::{Error, Result};

/// `--ws-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    CapabilityToken,
    SignedBearerToken,
}

/// The auth flags as given on the command line.
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// `--ws-auth` (inferred from the other flags when absent).
    pub mode: Option<AuthMode>,
    pub token_file: Option<PathBuf>,
    pub token_sha256: Option<String>,
    pub shared_secret_file: Option<PathBuf>,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub max_clock_skew_secs: Option<u64>,
    /// `--ws-insecure-no-auth`: no auth at all (loopback or unix only).
    pub insecure_no_auth: bool,
}

impl AuthSettings {
    /// Whether any auth flag was given.
    pub fn any(&self) -> bool {
        self.mode.is_some()
            || self.token_file.is_some()
            || self.token_sha256.is_some()
            || self.shared_secret_file.is_some()
            || self.issuer.is_some()
            || self.audience.is_some()
            || self.max_clock_skew_secs.is_some()
            || self.insecure_no_auth
    }
}

/// How a listener authenticates upgrade requests.
#[derive(Clone)]
pub enum AuthPolicy {
    /// `--ws-insecure-no-auth`.
    None,
    CapabilityToken {
        sha256: [u8; 32],
    },
    SignedBearerToken(JwtVerifier),
}

impl std::fmt::Debug for AuthPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mode_name())
    }
}

/// Why an upgrade request was refused (for logs only: the client gets a
/// bare 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("no Authorization header")]
    Missing,
    #[error("the Authorization header is not `Bearer <token>`")]
    NotBearer,
    #[error("wrong capability token")]
    WrongToken,
    #[error("bearer token refused: {0}")]
    Jwt(#[from] JwtError),
}

const TOKEN_FLAGS: &str = "--ws-token-file or --ws-token-sha256";
const JWT_ONLY_FLAGS: &str = "--ws-issuer, --ws-audience and --ws-max-clock-skew-seconds";

impl AuthPolicy {
    /// Builds the policy from the flags, reading the secret files.
    pub fn from_settings(s: &AuthSettings) -> Result<Self> {
        let has_token = s.token_file.is_some() || s.token_sha256.is_some();
        let has_jwt_extras =
            s.issuer.is_some() || s.audience.is_some() || s.max_clock_skew_secs.is_some();
        let has_jwt = s.shared_secret_file.is_some() || has_jwt_extras;
        if s.insecure_no_auth {
            if s.mode.is_some() || has_token || has_jwt {
                return Err(config(
                    "--ws-insecure-no-auth conflicts with the other --ws-* flags",
                ));
            }
            return Ok(AuthPolicy::None);
        }
        let mode = match s.mode {
            Some(m) => m,
            None if has_token && has_jwt => {
                return Err(config(format!(
                    "{TOKEN_FLAGS} (capability token) and --ws-shared-secret-file (signed bearer token) are exclusive"
                )));
            }
            None if has_token => AuthMode::CapabilityToken,
            None if has_jwt => AuthMode::SignedBearerToken,
            None => {
                return Err(config(format!(
                    "a ws:// or unix:// listener needs auth: {TOKEN_FLAGS}, or --ws-shared-secret-file \
                     (or --ws-insecure-no-auth, for loopback and unix sockets only)"
                )));
            }
        };
        match mode {
            AuthMode::CapabilityToken => {
                if has_jwt {
                    return Err(config(format!(
                        "--ws-shared-secret-file and {JWT_ONLY_FLAGS} need --ws-auth signed-bearer-token"
                    )));
                }
                let sha256 = match (&s.token_file, &s.token_sha256) {
                    (Some(_), Some(_)) => {
                        return Err(config(
                            "give exactly one of --ws-token-file and --ws-token-sha256",
                        ));
                    }
                    (Some(path), None) => {
                        let token = read_secret(path)?;
                        sha256(&token)
                    }
                    (None, Some(hex)) => parse_sha256_hex(hex)?,
                    (None, None) => {
                        return Err(config(format!(
                            "--ws-auth capability-token needs {TOKEN_FLAGS}"
                        )));
                    }
                };
                Ok(AuthPolicy::CapabilityToken { sha256 })
            }
            AuthMode::SignedBearerToken => {
                if has_token {
                    return Err(config(format!(
                        "{TOKEN_FLAGS} need --ws-auth capability-token"
                    )));
                }
                let Some(path) = &s.shared_secret_file else {
                    return Err(config(
                        "--ws-auth signed-bearer-token needs --ws-shared-secret-file",
                    ));
                };
                let secret = read_secret(path)?;
                let nonempty = |v: &Option<String>| {
                    v.as_deref()
                        .map(str::trim)
                        .filter(|v| !v.is_empty())
                        .map(str::to_owned)
                };
                let verifier = JwtVerifier::new(
                    secret,
                    nonempty(&s.issuer),
                    nonempty(&s.audience),
                    s.max_clock_skew_secs.unwrap_or(DEFAULT_MAX_CLOCK_SKEW_SECS),
                )
                .map_err(|e| config(format!("{}: {e}", path.display())))?;
                Ok(AuthPolicy::SignedBearerToken(verifier))
            }
        }
    }

    /// `capability-token`, `signed-bearer-token` or `none`.
    pub fn mode_name(&self) -> &'static str {
        match self {
            AuthPolicy::None => "none",
            AuthPolicy::CapabilityToken { .. } => "capability-token",
            AuthPolicy::SignedBearerToken(_) => "signed-bearer-token",
        }
    }

    /// Checks an upgrade request's headers at `now` (epoch seconds).
    pub fn authorize(&self, headers: &HeaderMap, now: i64) -> std::result::Result<(), AuthFailure> {
        match self {
            AuthPolicy::None => Ok(()),
            AuthPolicy::CapabilityToken { sha256: expected } => {
                let token = bearer_token(headers)?;
                let actual = sha256(token.as_bytes());
                if bool::from(actual.ct_eq(expected)) {
                    Ok(())
                } else {
                    Err(AuthFailure::WrongToken)
                }
            }
            AuthPolicy::SignedBearerToken(verifier) => {
                let token = bearer_token(headers)?;
                verifier.verify(token, now).map_err(AuthFailure::Jwt)
            }
        }
    }
}

/// The token of the only `Authorization: Bearer <token>` header.
fn bearer_token(headers: &HeaderMap) -> std::result::Result<&str, AuthFailure> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthFailure::Missing)?;
    if values.next().is_some() {
        return Err(AuthFailure::NotBearer);
    }
    let value = value.to_str().map_err(|_| AuthFailure::NotBearer)?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthFailure::NotBearer)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthFailure::NotBearer);
    }
    Ok(token)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn parse_sha256_hex(hex: &str) -> Result<[u8; 32]> {
    let hex = hex.trim();
    let bad = || config("--ws-token-sha256 must be 64 hexadecimal digits (a SHA-256 digest)");
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// Reads a secret file: surrounding whitespace is trimmed, empty is an
/// error. Warns when others may read it. The content is never logged.
fn read_secret(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|source| Error::TokenFile {
        path: path.to_owned(),
        source,
    })?;
    warn_if_readable_by_others(path);
    let trimmed = raw.trim_ascii();
    if trimmed.is_empty() {
        return Err(config(format!("{} is empty", path.display())));
    }
    Ok(trimmed.to_vec())
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            "the secret file can be read by other users; chmod 600 it"
        );
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

fn config(message: impl Into<String>) -> Error {
    Error::Config(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::jwt::sign_hs256;
    use axum::http::HeaderValue;
    use serde_json::json;

    const TOKEN: &str = "s3cret-capability-token";
    const NOW: i64 = 1_700_000_000;

    fn headers(auth: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for a in auth {
            h.append(AUTHORIZATION, HeaderValue::from_str(a).unwrap());
        }
        h
    }

    fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn capability_token_from_a_file_or_a_digest() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(&dir, "token", &format!("  {TOKEN}\n"));
        let from_file = AuthPolicy::from_settings(&AuthSettings {
            token_file: Some(file),
            ..Default::default()
        })
        .unwrap();
        let from_hex = AuthPolicy::from_settings(&AuthSettings {
            mode: Some(AuthMode::CapabilityToken),
            token_sha256: Some(hex(&sha256(TOKEN.as_bytes())).to_uppercase()),
            ..Default::default()
        })
        .unwrap();
        for p in [&from_file, &from_hex] {
            assert_eq!(p.mode_name(), "capability-token");
            let ok = format!("Bearer {TOKEN}");
            assert_eq!(p.authorize(&headers(&[&ok]), NOW), Ok(()));
            let lower = format!("bearer  {TOKEN} ");
            assert_eq!(p.authorize(&headers(&[&lower]), NOW), Ok(()));
            assert_eq!(p.authorize(&headers(&[]), NOW), Err(AuthFailure::Missing));
            assert_eq!(
                p.authorize(&headers(&["Bearer wrong"]), NOW),
                Err(AuthFailure::WrongToken)
            );
            assert_eq!(
                p.authorize(&headers(&[&format!("Basic {TOKEN}")]), NOW),
                Err(AuthFailure::NotBearer)
            );
            assert_eq!(
                p.authorize(&headers(&["Bearer "]), NOW),
                Err(AuthFailure::NotBearer)
            );
            assert_eq!(
                p.authorize(&headers(&[&ok, &ok]), NOW),
                Err(AuthFailure::NotBearer),
                "two Authorization headers"
            );
            assert!(!format!("{p:?}").contains(TOKEN));
        }
    }

    #[test]
    fn the_flags_must_name_exactly_one_mode() {
        let dir = tempfile::tempdir().unwrap();
        let token = write(&dir, "token", TOKEN);
        let secret = write(&dir, "secret", &"k".repeat(32));
        let digest = hex(&sha256(b"x"));
        let bad = [
            AuthSettings::default(),
            AuthSettings {
                token_file: Some(token.clone()),
                token_sha256: Some(digest.clone()),
                ..Default::default()
            },
            AuthSettings {
                token_file: Some(token.clone()),
                shared_secret_file: Some(secret.clone()),
                ..Default::default()
            },
            AuthSettings {
                mode: Some(AuthMode::CapabilityToken),
                ..Default::default()
            },
            AuthSettings {
                mode: Some(AuthMode::CapabilityToken),
                token_file: Some(token.clone()),
                audience: Some("a".into()),
                ..Default::default()
            },
            AuthSettings {
                mode: Some(AuthMode::SignedBearerToken),
                token_file: Some(token.clone()),
                ..Default::default()
            },
            AuthSettings {
                mode: Some(AuthMode::SignedBearerToken),
                ..Default::default()
            },
            AuthSettings {
                issuer: Some("ci".into()),
                ..Default::default()
            },
            AuthSettings {
                insecure_no_auth: true,
                token_file: Some(token.clone()),
                ..Default::default()
            },
            AuthSettings {
                token_sha256: Some("abc".into()),
                ..Default::default()
            },
            AuthSettings {
                token_sha256: Some("g".repeat(64)),
                ..Default::default()
            },
            AuthSettings {
                token_file: Some(dir.path().join("missing")),
                ..Default::default()
            },
            AuthSettings {
                token_file: Some(write(&dir, "empty", " \n")),
                ..Default::default()
            },
            AuthSettings {
                shared_secret_file: Some(write(&dir, "short", "too-short")),
                ..Default::default()
            },
        ];
        for s in bad {
            assert!(AuthPolicy::from_settings(&s).is_err(), "{s:?}");
        }
        let none = AuthPolicy::from_settings(&AuthSettings {
            insecure_no_auth: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(none.authorize(&headers(&[]), NOW), Ok(()));
    }

    #[test]
    fn signed_bearer_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let key = "k".repeat(40);
        let secret = write(&dir, "secret", &format!("{key}\n"));
        let p = AuthPolicy::from_settings(&AuthSettings {
            shared_secret_file: Some(secret),
            issuer: Some("ci".into()),
            audience: Some("keel".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(p.mode_name(), "signed-bearer-token");
        let good = sign_hs256(
            key.as_bytes(),
            &json!({"iss": "ci", "aud": "keel", "exp": NOW + 60}),
        );
        assert_eq!(
            p.authorize(&headers(&[&format!("Bearer {good}")]), NOW),
            Ok(())
        );
        let expired = sign_hs256(
            key.as_bytes(),
            &json!({"iss": "ci", "aud": "keel", "exp": NOW - 3600}),
        );
        assert_eq!(
            p.authorize(&headers(&[&format!("Bearer {expired}")]), NOW),
            Err(AuthFailure::Jwt(JwtError::Expired))
        );
        assert!(!format!("{p:?}").contains(&key));
    }
}
