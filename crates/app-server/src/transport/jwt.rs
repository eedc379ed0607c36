//! Signed bearer tokens: compact JWS (RFC 7515) with HS256 only, checked
//! the way the network listeners need it.
//!
//! The signature is verified first (HMAC-SHA256, compared in constant time
//! by `hmac`'s `verify_slice`); only then are the claims read. `alg` must be
//! exactly `HS256` (never `none`, never an asymmetric algorithm), a `crit`
//! header is refused, `exp` is required, `nbf` is honoured when present,
//! `iss` and `aud` must match when the server was configured with them, and
//! `exp`/`nbf` get a clock-skew allowance. Failures are a [`JwtError`] whose
//! text is for logs only; clients just see 401.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Longest token accepted, in bytes (headers are limited anyway).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Shortest shared secret accepted: an HS256 key should carry 256 bits.
pub const MIN_SECRET_BYTES: usize = 32;
/// Default allowance for clock differences on `exp` and `nbf`.
pub const DEFAULT_MAX_CLOCK_SKEW_SECS: u64 = 30;

/// Why a token was refused (for logs; never sent to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("not a compact JWS")]
    Malformed,
    #[error("unsupported JWS header")]
    Header,
    #[error("bad signature")]
    Signature,
    #[error("claims are not valid JSON or lack exp")]
    Claims,
    #[error("expired")]
    Expired,
    #[error("not valid yet")]
    NotYetValid,
    #[error("issuer mismatch")]
    Issuer,
    #[error("audience mismatch")]
    Audience,
}

/// What a verifier checks besides the signature.
#[derive(Clone)]
pub struct JwtVerifier {
    secret: Vec<u8>,
    issuer: Option<String>,
    audience: Option<String>,
    max_clock_skew_secs: i64,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("secret", &"<redacted>")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("max_clock_skew_secs", &self.max_clock_skew_secs)
            .finish()
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    typ: Option<String>,
    #[serde(default)]
    crit: Option<Value>,
}

#[derive(Deserialize)]
struct Claims {
    exp: f64,
    #[serde(default)]
    nbf: Option<f64>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl JwtVerifier {
    /// A verifier; `secret` must hold at least [`MIN_SECRET_BYTES`].
    pub fn new(
        secret: Vec<u8>,
        issuer: Option<String>,
        audience: Option<String>,
        max_clock_skew_secs: u64,
    ) -> Result<Self, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "the shared secret must be at least {MIN_SECRET_BYTES} bytes"
            ));
        }
        let skew = i64::try_from(max_clock_skew_secs)
            .map_err(|_| "the clock skew is too large".to_owned())?;
        Ok(Self {
            secret,
            issuer,
            audience,
            max_clock_skew_secs: skew,
        })
    }

    /// Checks `token` at `now` (seconds since the epoch).
    pub fn verify(&self, token: &str, now: i64) -> Result<(), JwtError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(header_b64), Some(claims_b64), Some(sig_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let header: Header = decode_json(header_b64).ok_or(JwtError::Malformed)?;
        if header.alg != "HS256"
            || header.crit.is_some()
            || header
                .typ
                .as_deref()
                .is_some_and(|t| !t.eq_ignore_ascii_case("JWT"))
        {
            return Err(JwtError::Header);
        }
        let signature = URL_SAFE_NO_PAD
            .decode(sig_b64)
            .map_err(|_| JwtError::Malformed)?;
        let mut mac = HmacSha256::new_from_slice(&self.secret).map_err(|_| JwtError::Signature)?;
        mac.update(header_b64.as_bytes());
        mac.update(b".");
        mac.update(claims_b64.as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| JwtError::Signature)?;

        let claims: Claims = decode_json(claims_b64).ok_or(JwtError::Claims)?;
        if !claims.exp.is_finite() || claims.nbf.is_some_and(|n| !n.is_finite()) {
            return Err(JwtError::Claims);
        }
        let now = now as f64;
        let skew = self.max_clock_skew_secs as f64;
        if now > claims.exp + skew {
            return Err(JwtError::Expired);
        }
        if claims.nbf.is_some_and(|nbf| now < nbf - skew) {
            return Err(JwtError::NotYetValid);
        }
        if let Some(expected) = &self.issuer
            && claims.iss.as_deref() != Some(expected.as_str())
        {
            return Err(JwtError::Issuer);
        }
        if let Some(expected) = &self.audience {
            let ok = match &claims.aud {
                Some(Audience::One(a)) => a == expected,
                Some(Audience::Many(all)) => all.iter().any(|a| a == expected),
                None => false,
            };
            if !ok {
                return Err(JwtError::Audience);
            }
        }
        Ok(())
    }
}

fn decode_json<T: for<'de> Deserialize<'de>>(segment: &str) -> Option<T> {
    let bytes = URL_SAFE_NO_PAD.decode(segment).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Signs `claims` with HS256: the token a client presents. For tests and
/// tooling; the server only verifies.
pub fn sign_hs256(secret: &[u8], claims: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string().as_bytes());
    let signing_input = format!("{header}.{body}");
    let signature = match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(signing_input.as_bytes());
            mac.finalize().into_bytes().to_vec()
        }
        // HMAC accepts keys of any length; this branch cannot be taken.
        Err(_) => Vec::new(),
    };
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    const NOW: i64 = 1_700_000_000;

    fn verifier(iss: Option<&str>, aud: Option<&str>) -> JwtVerifier {
        JwtVerifier::new(
            SECRET.to_vec(),
            iss.map(str::to_owned),
            aud.map(str::to_owned),
            30,
        )
        .unwrap()
    }

    #[test]
    fn rfc7515_appendix_a1_verifies() {
        // The HS256 example of RFC 7515, A.1 (its key is 64 bytes).
        let key = URL_SAFE_NO_PAD
            .decode(
                "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow",
            )
            .unwrap();
        let token = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let v = JwtVerifier::new(key, Some("joe".into()), None, 0).unwrap();
        assert_eq!(v.verify(token, 1_300_819_380), Ok(()));
        assert_eq!(v.verify(token, 1_300_819_381), Err(JwtError::Expired));
    }

    #[test]
    fn valid_token_with_issuer_and_audience() {
        let t = sign_hs256(
            SECRET,
            &json!({"iss": "ci", "aud": ["x", "keel"], "exp": NOW + 60}),
        );
        assert_eq!(verifier(Some("ci"), Some("keel")).verify(&t, NOW), Ok(()));
        let t = sign_hs256(SECRET, &json!({"aud": "keel", "exp": NOW + 60}));
        assert_eq!(verifier(None, Some("keel")).verify(&t, NOW), Ok(()));
    }

    #[test]
    fn expiry_and_not_before_honour_the_skew() {
        let v = verifier(None, None);
        let t = sign_hs256(SECRET, &json!({"exp": NOW - 10}));
        assert_eq!(v.verify(&t, NOW), Ok(()), "within the 30 s skew");
        let t = sign_hs256(SECRET, &json!({"exp": NOW - 31}));
        assert_eq!(v.verify(&t, NOW), Err(JwtError::Expired));
        let t = sign_hs256(SECRET, &json!({"exp": NOW + 600, "nbf": NOW + 20}));
        assert_eq!(v.verify(&t, NOW), Ok(()));
        let t = sign_hs256(SECRET, &json!({"exp": NOW + 600, "nbf": NOW + 31}));
        assert_eq!(v.verify(&t, NOW), Err(JwtError::NotYetValid));
    }

    #[test]
    fn claims_must_match_the_configuration() {
        let t = sign_hs256(
            SECRET,
            &json!({"iss": "other", "aud": "nope", "exp": NOW + 60}),
        );
        assert_eq!(
            verifier(Some("ci"), None).verify(&t, NOW),
            Err(JwtError::Issuer)
        );
        assert_eq!(
            verifier(None, Some("keel")).verify(&t, NOW),
            Err(JwtError::Audience)
        );
        let t = sign_hs256(SECRET, &json!({"exp": NOW + 60}));
        assert_eq!(
            verifier(None, Some("keel")).verify(&t, NOW),
            Err(JwtError::Audience),
            "a missing aud does not match"
        );
        let t = sign_hs256(SECRET, &json!({"iss": "ci"}));
        assert_eq!(
            verifier(None, None).verify(&t, NOW),
            Err(JwtError::Claims),
            "exp is required"
        );
    }

    #[test]
    fn forged_and_malformed_tokens_are_refused() {
        let v = verifier(None, None);
        let other = sign_hs256(
            b"another-secret-another-secret-xx",
            &json!({"exp": NOW + 60}),
        );
        assert_eq!(v.verify(&other, NOW), Err(JwtError::Signature));
        // alg none, with and without a signature.
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let body = URL_SAFE_NO_PAD.encode(json!({"exp": NOW + 60}).to_string());
        assert_eq!(
            v.verify(&format!("{none_header}.{body}."), NOW),
            Err(JwtError::Header)
        );
        // A valid signature over a tampered body.
        let good = sign_hs256(SECRET, &json!({"exp": NOW + 60}));
        let mut parts: Vec<&str> = good.split('.').collect();
        let evil = URL_SAFE_NO_PAD.encode(json!({"exp": NOW + 6_000_000}).to_string());
        parts[1] = &evil;
        assert_eq!(v.verify(&parts.join("."), NOW), Err(JwtError::Signature));
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            "!!.!!.!!",
            &"a".repeat(MAX_TOKEN_BYTES + 1),
        ] {
            assert_eq!(v.verify(bad, NOW), Err(JwtError::Malformed), "{bad:.20}");
        }
    }

    #[test]
    fn short_secrets_are_refused_and_debug_redacts() {
        assert!(JwtVerifier::new(b"short".to_vec(), None, None, 30).is_err());
        let dbg = format!("{:?}", verifier(None, None));
        assert!(!dbg.contains("0123456789abcdef"), "{dbg}");
    }
}
