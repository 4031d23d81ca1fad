//! HTTP basic auth against the web config's bcrypt hashes, at bcrypt's cost once per distinct
//! credential, not once per request: a bcrypt check at cost 10 takes ~50-80 ms of CPU, and
//! Prometheus sends the same user and password with every scrape. The outcome of each
//! (user, password, hash) is cached under its SHA-256, so neither the password nor anything
//! that can be checked against it offline without bcrypt's cost is kept; a changed hash (a
//! reloaded file) is a new key.
//!
//! Good and bad outcomes are cached apart, each bounded and evicting its least recently used
//! entry: only a credential that passed bcrypt enters the good cache, so no number of wrong
//! passwords can push the right one out.
//!
//! bcrypt runs off the async threads (they are shared with the enforcer) and one at a time, and
//! at most [`BCRYPT_QUEUE`] requests hold a place for it (the one being checked included); one
//! more is answered [`Outcome::Busy`] at once, without bcrypt. So a flood of wrong passwords
//! costs at most one core and a bounded number of waiting requests, and a cached good
//! credential never waits for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use tokio::sync::Semaphore;

/// Good credentials remembered: a handful of users, and their previous hashes after a reload.
const GOOD_CACHE: usize = 64;

/// Wrong credentials remembered, so that a client retrying a stale password costs one bcrypt,
/// not one per request.
const BAD_CACHE: usize = 256;

/// Requests that may hold a place for a bcrypt check at once: the one being checked and those
/// waiting. A few, so that a new credential (Prometheus after a restart) usually finds one,
/// and no more, so that they hold few connections and little memory.
pub const BCRYPT_QUEUE: usize = 4;

/// A bcrypt hash (cost 10) of nothing anyone knows: an unknown user is checked against it, so
/// that the answer takes as long as for a known user with a wrong password.
const UNKNOWN_USER_HASH: &str = "$2y$10$8mDrRPRHhhvWbRKHyRZNNOgkSTkKdrZ9vwjxLoPF1BeRGdfWwR1zG";

/// The realm of `WWW-Authenticate`.
pub const CHALLENGE: &str = "Basic realm=\"ceph-recovery-budget\", charset=\"UTF-8\"";

/// What a request's credentials are worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// One of the users, with the right password.
    Good,
    /// None, not basic auth, an unknown user or a wrong password.
    Bad,
    /// Not known yet, and [`BCRYPT_QUEUE`] requests already wait for bcrypt: not checked.
    Busy,
}

/// Keys with the time of their last use, the least recently used one evicted when full.
struct Lru {
    capacity: usize,
    tick: u64,
    used: HashMap<[u8; 32], u64>,
}

impl Lru {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            tick: 0,
            used: HashMap::new(),
        }
    }

    /// Whether `key` is here (then it is the most recently used).
    fn hit(&mut self, key: &[u8; 32]) -> bool {
        self.tick += 1;
        match self.used.get_mut(key) {
            Some(t) => {
                *t = self.tick;
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, key: [u8; 32]) {
        self.tick += 1;
        if self.used.len() >= self.capacity && !self.used.contains_key(&key) {
            // A linear scan: at most a few hundred entries, and only after a bcrypt.
            if let Some(oldest) = self.used.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k) {
                self.used.remove(&oldest);
            }
        }
        self.used.insert(key, self.tick);
    }
}

pub struct Verifier {
    good: Mutex<Lru>,
    bad: Mutex<Lru>,
    /// Places for a bcrypt check (taken without waiting).
    queue: Semaphore,
    /// One bcrypt at a time; its permit goes into the blocking task, so that a request given up
    /// meanwhile (the client left) does not let a second one start beside it.
    bcrypt: Arc<Semaphore>,
}

impl Default for Verifier {
    fn default() -> Self {
        Self {
            good: Mutex::new(Lru::new(GOOD_CACHE)),
            bad: Mutex::new(Lru::new(BAD_CACHE)),
            queue: Semaphore::new(BCRYPT_QUEUE),
            bcrypt: Arc::new(Semaphore::new(1)),
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
    pub async fn check(&self, users: &BTreeMap<String, String>, header: Option<&[u8]>) -> Outcome {
        let Some((user, password)) = header.and_then(credentials) else {
            return Outcome::Bad;
        };
        let known = users.get(&user);
        let hash = known.map_or(UNKNOWN_USER_HASH, String::as_str).to_string();
        let key = cache_key(&user, &password, &hash);
        if let Some(outcome) = self.cached(&key) {
            return outcome;
        }
        let Ok(_place) = self.queue.try_acquire() else {
            return Outcome::Busy;
        };
        let Ok(slot) = Arc::clone(&self.bcrypt).acquire_owned().await else {
            return Outcome::Bad;
        };
        // Whoever waited may find the answer computed meanwhile.
        if let Some(outcome) = self.cached(&key) {
            return outcome;
        }
        let matches = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            bcrypt::verify(&password, &hash)
        })
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(false);
        if matches && known.is_some() {
            lock(&self.good).insert(key);
            Outcome::Good
        } else {
            lock(&self.bad).insert(key);
            Outcome::Bad
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Outcome> {
        if lock(&self.good).hit(key) {
            return Some(Outcome::Good);
        }
        lock(&self.bad).hit(key).then_some(Outcome::Bad)
    }

    /// Good and bad credentials remembered (tests).
    pub fn cached_credentials(&self) -> (usize, usize) {
        (lock(&self.good).used.len(), lock(&self.bad).used.len())
    }
}

/// A cache whose holder panicked is still a consistent map (each operation leaves it whole).
fn lock(cache: &Mutex<Lru>) -> std::sync::MutexGuard<'_, Lru> {
    cache.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        assert_eq!(
            v.check(&users, Some(&basic("prom", "right"))).await,
            Outcome::Good
        );
        assert_eq!(
            v.check(&users, Some(&basic("prom", "wrong"))).await,
            Outcome::Bad
        );
        assert_eq!(
            v.check(&users, Some(&basic("nobody", "right"))).await,
            Outcome::Bad
        );
        assert_eq!(v.check(&users, None).await, Outcome::Bad);
        assert_eq!(
            v.cached_credentials(),
            (1, 2),
            "no header: nothing to remember"
        );
        // With every bcrypt place taken, what is cached is still answered, either way.
        let full = v.queue.try_acquire_many(BCRYPT_QUEUE as u32).unwrap();
        for _ in 0..10 {
            assert_eq!(
                v.check(&users, Some(&basic("prom", "right"))).await,
                Outcome::Good
            );
            assert_eq!(
                v.check(&users, Some(&basic("prom", "wrong"))).await,
                Outcome::Bad
            );
        }
        assert_eq!(
            v.cached_credentials(),
            (1, 2),
            "no new entry for a known one"
        );
        drop(full);
        // A new hash for the user (a reloaded file): the old password no longer passes.
        let users = BTreeMap::from([("prom".to_string(), bcrypt::hash("new", 4).unwrap())]);
        assert_eq!(
            v.check(&users, Some(&basic("prom", "right"))).await,
            Outcome::Bad
        );
        assert_eq!(
            v.check(&users, Some(&basic("prom", "new"))).await,
            Outcome::Good
        );
    }

    #[tokio::test]
    async fn a_good_credential_survives_any_number_of_bad_ones() {
        let users = BTreeMap::from([("prom".to_string(), bcrypt::hash("right", 4).unwrap())]);
        let v = Verifier::new();
        assert_eq!(
            v.check(&users, Some(&basic("prom", "right"))).await,
            Outcome::Good
        );
        for i in 0..3 * BAD_CACHE {
            // Unknown users are checked against the cost-10 hash: keep this loop to known ones.
            let wrong = basic("prom", &format!("w{i}"));
            assert_eq!(v.check(&users, Some(&wrong)).await, Outcome::Bad);
        }
        assert_eq!(
            v.cached_credentials(),
            (1, BAD_CACHE),
            "both bounded, apart"
        );
        // Still cached: answered while no bcrypt could run.
        let _full = v.queue.try_acquire_many(BCRYPT_QUEUE as u32).unwrap();
        assert_eq!(
            v.check(&users, Some(&basic("prom", "right"))).await,
            Outcome::Good
        );
        assert_eq!(
            v.check(&users, Some(&basic("prom", "w0"))).await,
            Outcome::Busy,
            "the oldest wrong one went, and a new check has no place"
        );
    }

    #[tokio::test]
    async fn at_most_the_queue_waits_for_bcrypt_the_rest_are_busy_at_once() {
        let users = BTreeMap::from([("prom".to_string(), bcrypt::hash("right", 4).unwrap())]);
        let v = Arc::new(Verifier::new());
        // bcrypt held elsewhere: whoever gets a place waits.
        let running = Arc::clone(&v.bcrypt).acquire_owned().await.unwrap();
        let tries = 3 * BCRYPT_QUEUE;
        let checks: Vec<_> = (0..tries)
            .map(|i| {
                let (v, users) = (Arc::clone(&v), users.clone());
                tokio::spawn(async move {
                    v.check(&users, Some(&basic("prom", &format!("w{i}"))))
                        .await
                })
            })
            .collect();
        // The ones without a place are answered without waiting for bcrypt.
        let turned_away = tries - BCRYPT_QUEUE;
        let settled = tokio::time::timeout(Duration::from_secs(10), async {
            while checks.iter().filter(|c| c.is_finished()).count() < turned_away {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(settled.is_ok(), "turned away at once, while bcrypt is held");
        drop(running);
        let mut outcomes = Vec::new();
        for c in checks {
            outcomes.push(c.await.unwrap());
        }
        let count = |o| outcomes.iter().filter(|x| **x == o).count();
        assert_eq!(
            (count(Outcome::Bad), count(Outcome::Busy)),
            (BCRYPT_QUEUE, turned_away)
        );
        assert_eq!(
            v.cached_credentials(),
            (0, BCRYPT_QUEUE),
            "a busy one is not remembered"
        );
    }

    #[test]
    fn the_least_recently_used_key_goes_first() {
        let mut lru = Lru::new(2);
        let (a, b, c) = ([1; 32], [2; 32], [3; 32]);
        lru.insert(a);
        lru.insert(b);
        assert!(lru.hit(&a));
        lru.insert(c);
        assert!(lru.hit(&a) && lru.hit(&c) && !lru.hit(&b));
        lru.insert(c);
        assert_eq!(lru.used.len(), 2, "a key already there takes no new place");
    }
}
