//! Reply inboxes (request/reply, docs/subjects.md *Request and reply*): which connection owns
//! each inbox token, and which inboxes each user may reply to.
//!
//! - A **claim**: a connection's first subscription under `_INBOX.<token>` claims the token
//!   for that connection until it closes; one token per connection, and a token claimed by
//!   another connection is refused, so no one subscribes to someone else's inbox. In a
//!   cluster the member where the requester subscribed feeds its inbox from every other
//!   member (`cluster::fan_in`); each such feed claims the token at that member while it is
//!   open ([`Inboxes::claim_feed`]), so no user there can claim it either.
//! - A **grant**: when a topic delivers a request (a message with a `reply-to` header) to a
//!   subscriber whose connection receives headers, that connection's user may publish to the
//!   named inbox, from any of its connections (the SDK subscribes and publishes on different
//!   connections). Each user keeps its `max_reply_inboxes_per_user` most recent grants; a new
//!   one past the bound evicts the oldest (counted), whose reply is then refused like any
//!   publish its permissions do not allow. Every anonymous connection (`auth_mode: none`,
//!   where anyone may publish anywhere) shares one set.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus::IntCounter;

/// Why an inbox claim is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimRefused {
    /// Another connection holds the token.
    #[error("the reply inbox `{0}` belongs to another connection")]
    Taken(String),
    /// This connection already holds another token.
    #[error("this connection's reply inbox is `{0}`: a connection has one")]
    HasOther(String),
}

/// One connection's recent grants, oldest first.
#[derive(Default)]
struct Grants {
    order: VecDeque<String>,
    set: HashSet<String>,
}

/// Who holds a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// A client connection (its id).
    Conn(u64),
    /// Other members' feeds of the requester's inbox (how many are open: a resubscribing
    /// requester may have two for a moment).
    Feeds(usize),
}

#[derive(Default)]
struct State {
    /// Token → who holds it.
    owners: HashMap<String, Holder>,
    /// Connection → its token.
    tokens: HashMap<u64, String>,
    /// Connection → its user's key (see [`Inboxes::bind`]).
    users: HashMap<u64, Arc<str>>,
    /// User → the inboxes it may reply to.
    grants: HashMap<Arc<str>, Grants>,
}

/// The broker's reply inboxes: claims and grants, by connection.
pub struct Inboxes {
    max_grants: usize,
    evicted: IntCounter,
    state: Mutex<State>,
}

impl Inboxes {
    /// No claims and no grants; each connection keeps at most `max_grants` grants (at least
    /// one), and each grant evicted at that bound counts in `evicted`.
    pub fn new(max_grants: usize, evicted: IntCounter) -> Inboxes {
        Inboxes {
            max_grants: max_grants.max(1),
            evicted,
            state: Mutex::new(State::default()),
        }
    }

    /// Claims `token` for connection `conn` (again, if it holds it already).
    pub fn claim(&self, conn: u64, token: &str) -> Result<(), ClaimRefused> {
        let mut s = self.state.lock();
        if let Some(held) = s.tokens.get(&conn) {
            return if held == token {
                Ok(())
            } else {
                Err(ClaimRefused::HasOther(held.clone()))
            };
        }
        if s.owners.contains_key(token) {
            return Err(ClaimRefused::Taken(token.to_string()));
        }
        s.owners.insert(token.to_string(), Holder::Conn(conn));
        s.tokens.insert(conn, token.to_string());
        Ok(())
    }

    /// Claims `token` for another member's feed of a requester's inbox (a peer's subscription
    /// under `_INBOX.<token>`); refused when a client connection here holds it. Release it
    /// with [`Inboxes::release_feed`] when the feed's subscription ends.
    pub fn claim_feed(&self, token: &str) -> Result<(), ClaimRefused> {
        let mut s = self.state.lock();
        match s.owners.get_mut(token) {
            Some(Holder::Conn(_)) => Err(ClaimRefused::Taken(token.to_string())),
            Some(Holder::Feeds(n)) => {
                *n += 1;
                Ok(())
            }
            None => {
                s.owners.insert(token.to_string(), Holder::Feeds(1));
                Ok(())
            }
        }
    }

    /// Ends one feed's claim of `token` (made by [`Inboxes::claim_feed`]).
    pub fn release_feed(&self, token: &str) {
        let mut s = self.state.lock();
        if let Some(Holder::Feeds(n)) = s.owners.get_mut(token) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                s.owners.remove(token);
            }
        }
    }

    /// Records that connection `conn` is `user`'s (a key naming the user; the same for all
    /// its connections).
    pub fn bind(&self, conn: u64, user: Arc<str>) {
        self.state.lock().users.insert(conn, user);
    }

    /// Lets the user of connection `conn` reply to `inbox`, evicting its oldest grant at the
    /// bound.
    pub fn grant(&self, conn: u64, inbox: &str) {
        let mut s = self.state.lock();
        let Some(user) = s.users.get(&conn).cloned() else {
            return;
        };
        let grants = s.grants.entry(user).or_default();
        if grants.set.contains(inbox) {
            return;
        }
        if grants.order.len() >= self.max_grants
            && let Some(oldest) = grants.order.pop_front()
        {
            grants.set.remove(&oldest);
            self.evicted.inc();
        }
        grants.order.push_back(inbox.to_string());
        grants.set.insert(inbox.to_string());
    }

    /// Whether a request naming `inbox` was delivered to the user of connection `conn` (among
    /// its recent grants).
    pub fn may_reply(&self, conn: u64, inbox: &str) -> bool {
        let s = self.state.lock();
        s.users
            .get(&conn)
            .and_then(|user| s.grants.get(user))
            .is_some_and(|g| g.set.contains(inbox))
    }

    /// Drops connection `conn`'s claim and binding (it closed). Its user's grants stay, for
    /// its other connections (bounded per user; users are bounded by the users document).
    pub fn forget(&self, conn: u64) {
        let mut s = self.state.lock();
        if let Some(token) = s.tokens.remove(&conn)
            && s.owners.get(&token) == Some(&Holder::Conn(conn))
        {
            s.owners.remove(&token);
        }
        s.users.remove(&conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inboxes(max: usize) -> Inboxes {
        let evicted = IntCounter::new("evicted", "evicted").expect("counter");
        Inboxes::new(max, evicted)
    }

    #[test]
    fn a_token_has_one_owner_and_a_connection_one_token() {
        let i = inboxes(4);
        assert_eq!(i.claim(1, "aaaa"), Ok(()));
        assert_eq!(i.claim(1, "aaaa"), Ok(()));
        assert_eq!(i.claim(2, "aaaa"), Err(ClaimRefused::Taken("aaaa".into())));
        assert_eq!(
            i.claim(1, "bbbb"),
            Err(ClaimRefused::HasOther("aaaa".into()))
        );
        i.forget(1);
        assert_eq!(i.claim(2, "aaaa"), Ok(()));
    }

    #[test]
    fn a_feed_claim_keeps_clients_out_until_the_last_feed_ends() {
        let i = inboxes(4);
        assert_eq!(i.claim_feed("tttt"), Ok(()));
        assert_eq!(
            i.claim_feed("tttt"),
            Ok(()),
            "a second feed of the same inbox"
        );
        assert_eq!(i.claim(1, "tttt"), Err(ClaimRefused::Taken("tttt".into())));
        i.release_feed("tttt");
        assert_eq!(i.claim(1, "tttt"), Err(ClaimRefused::Taken("tttt".into())));
        i.release_feed("tttt");
        assert_eq!(i.claim(1, "tttt"), Ok(()));
        // A token a client holds is not fed here, and a release does not free it.
        assert_eq!(
            i.claim_feed("tttt"),
            Err(ClaimRefused::Taken("tttt".into()))
        );
        i.release_feed("tttt");
        assert_eq!(i.claim(2, "tttt"), Err(ClaimRefused::Taken("tttt".into())));
    }

    #[test]
    fn grants_are_per_user_bounded_oldest_first() {
        let i = inboxes(2);
        i.bind(7, Arc::from("user:a"));
        i.bind(8, Arc::from("user:a"));
        i.bind(9, Arc::from("user:b"));
        i.grant(7, "_INBOX.t.1");
        i.grant(7, "_INBOX.t.2");
        i.grant(8, "_INBOX.t.2");
        assert_eq!(i.evicted.get(), 0);
        i.grant(7, "_INBOX.t.3");
        assert_eq!(i.evicted.get(), 1);
        assert!(!i.may_reply(7, "_INBOX.t.1"));
        assert!(i.may_reply(7, "_INBOX.t.2"));
        assert!(
            i.may_reply(8, "_INBOX.t.3"),
            "another connection of the same user"
        );
        assert!(!i.may_reply(9, "_INBOX.t.3"), "another user");
        assert!(!i.may_reply(10, "_INBOX.t.3"), "an unbound connection");
        i.forget(8);
        assert!(!i.may_reply(8, "_INBOX.t.3"));
        assert!(i.may_reply(7, "_INBOX.t.3"));
    }
}
