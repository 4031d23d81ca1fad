//! HTTP basic auth against the web config's bcrypt hashes, at bcrypt's cost once per distinct
//! credential, not once per request: a bcrypt check at cost 10 takes ~50-80 ms of CPU, and
//! Prometheus sends the same user and password with every scrape. The outcome of each
//! (user, password, hash) is cached under its SHA-256, so neither the password nor anything
//! that can be checked against it offline without bcrypt's cost is kept; a changed hash (a
//! reloaded file) is a new key.
//!
//! bcrypt runs off the async threads (they are shared with the enforcer) and one at a time: a
//! flood of wrong passwords costs at most one core, and a cached credential never waits for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use base64::Engine as _;
use tokio::sync::Semaphore;

/// Distinct credentials remembered. Legitimate ones are a handful; past this, an arbitrary
/// entry goes, so a stream of wrong passwords cannot grow memory.
const CACHE_SIZE: usize = 256;

/// A bcrypt hash (cost 10) of nothing anyone knows: an unknown user is checked against it, so
/// that the answer takes as long as for a known user with a wrong password.
const UNKNOWN_USER_HASH: &str = "$2y$10$8mDrRPRHhhvWbRKHyRZNNOgkSTkKdrZ9vwjxLoPF1BeRGdfWwR1zG";

/// The realm of `WWW-Authenticate`.
pub const CHALLENGE: &str = "Basic realm=\"ceph-recovery-budget\", charset=\"UTF-8\"";

pub struct Verifier {
    cache: Mutex<HashMap<[u8; 32], bool>>,
    bcrypt: Semaphore,
}

impl Default for Verifier {
    fn default() -> Self {
        Self {
            cache: Mutex::new(HashMap::new()),
            bcrypt: Semaphore::new(1),
        }
    }
}

/// The user and password of an `Authorization: Basic ...` header.
fn credentials(header: &[u8]) -> Option<(String, Vec<u8>)> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

fn cache_key(user: &str, password: &[u8], hash: &str) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    // Length-prefixed, so that no two different triples give the same input.
    for part in [user.as_bytes(), password, hash.as_bytes()] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(ctx.finish().as_ref());
    key
}

impl Verifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the `Authorization` header names one of `users` with the right password.
    pub async fn check(&self, users: &BTreeMap<String, String>, header: Option<&[u8]>) -> bool {
        let Some((user, password)) = header.and_then(credentials) else {
            return false;
        };
        let known = users.get(&user);
        let hash = known.map_or(UNKNOWN_USER_HASH, String::as_str).to_string();
        let key = cache_key(&user, &password, &hash);
        if let Some(ok) = self.cached(&key) {
            return ok;
        }
        // One bcrypt at a time; whoever waited may find the answer computed meanwhile.
        let Ok(_slot) = self.bcrypt.acquire().await else {
            return false;
        };
        if let Some(ok) = self.cached(&key) {
            return ok;
        }
        let matches = tokio::task::spawn_blocking(move || bcrypt::verify(&password, &hash))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(false);
        let ok = matches && known.is_some();
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_SIZE {
                if let Some(evict) = cache.keys().next().copied() {
                    cache.remove(&evict);
                }
            }
            cache.insert(key, ok);
        }
        ok
    }

    fn cached(&self, key: &[u8; 32]) -> Option<bool> {
        self.cache.lock().ok()?.get(key).copied()
    }

    /// Distinct credentials remembered (tests).
    pub fn cached_credentials(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
        .into_bytes()
    }

    #[test]
    fn the_unknown_user_hash_is_a_valid_bcrypt_hash() {
        assert!(UNKNOWN_USER_HASH.parse::<bcrypt::HashParts>().is_ok());
    }

    #[test]
    fn credentials_are_read_as_rfc_7617_says() {
        assert_eq!(
            credentials(&basic("prom", "a:b")),
            Some(("prom".into(), b"a:b".to_vec()))
        );
        assert_eq!(
            credentials(b"basic cHJvbTpwdw=="),
            Some(("prom".into(), b"pw".to_vec()))
        );
        assert_eq!(credentials(b"Bearer xyz"), None);
        assert_eq!(credentials(b"Basic !!!"), None);
        assert_eq!(credentials(b"Basic bm9jb2xvbg=="), None); // "nocolon"
    }

    #[tokio::test]
    async fn a_credential_costs_one_bcrypt_then_comes_from_the_cache() {
        let hash = bcrypt::hash("right", 4).unwrap();
        let users = BTreeMap::from([("prom".to_string(), hash)]);
        let v = Verifier::new();
        assert!(v.check(&users, Some(&basic("prom", "right"))).await);
        assert!(!v.check(&users, Some(&basic("prom", "wrong"))).await);
        assert!(!v.check(&users, Some(&basic("nobody", "right"))).await);
        assert!(!v.check(&users, None).await);
        assert_eq!(v.cached_credentials(), 3);
        for _ in 0..10 {
            assert!(v.check(&users, Some(&basic("prom", "right"))).await);
        }
        assert_eq!(
            v.cached_credentials(),
            3,
            "no new entry for a known credential"
        );
        // A new hash for the user (a reloaded file): the old password no longer passes.
        let users = BTreeMap::from([("prom".to_string(), bcrypt::hash("new", 4).unwrap())]);
        assert!(!v.check(&users, Some(&basic("prom", "right"))).await);
        assert!(v.check(&users, Some(&basic("prom", "new"))).await);
    }

    #[tokio::test]
    async fn the_cache_stays_bounded() {
        let users = BTreeMap::from([("prom".to_string(), bcrypt::hash("right", 4).unwrap())]);
        let v = Verifier::new();
        for i in 0..CACHE_SIZE + 20 {
            // Unknown users are checked against the cost-10 hash: keep this loop to known ones.
            assert!(
                !v.check(&users, Some(&basic("prom", &format!("w{i}"))))
                    .await
            );
        }
        assert_eq!(v.cached_credentials(), CACHE_SIZE);
    }
}
