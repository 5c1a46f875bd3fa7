//! Request/reply ([`Client::request`](crate::Client::request) and
//! [`Client::reply`](crate::Client::reply)): the client's reply inbox and the requests waiting
//! on it.
//!
//! A client has one inbox, `_INBOX.<token>.>` with a random 128-bit token, subscribed on its
//! first request. Request `n` names `_INBOX.<token>.<n>` in its `reply-to` header; a reply
//! published there comes back on the inbox subscription and is routed by its last token to
//! the request waiting for it. A reply to a request that is no longer waiting (it timed out)
//! is dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use starling_proto::INBOX_PREFIX;
use tokio::sync::oneshot;

use crate::Message;
use crate::subscription::Subscription;

/// Requests waiting for their reply, by number.
type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Message>>>>;

/// A client's reply inbox.
pub(crate) struct Inbox {
    token: String,
    next: AtomicU64,
    waiting: Waiting,
    /// Set once the inbox subscription is open (and its router running).
    subscribed: tokio::sync::OnceCell<()>,
}

impl Inbox {
    /// An inbox with a fresh random token, not subscribed yet.
    pub(crate) fn new() -> Inbox {
        Inbox {
            token: format!("{:032x}", rand::random::<u128>()),
            next: AtomicU64::new(1),
            waiting: Arc::default(),
            subscribed: tokio::sync::OnceCell::new(),
        }
    }

    /// The inbox subscription's pattern: `_INBOX.<token>.>`.
    pub(crate) fn pattern(&self) -> String {
        format!("{INBOX_PREFIX}.{}.>", self.token)
    }

    /// Opens the inbox subscription with `subscribe` the first time, and routes its replies.
    pub(crate) async fn ensure<F, Fut, E>(&self, subscribe: F) -> Result<(), E>
    where
        F: FnOnce(String) -> Fut,
        Fut: std::future::Future<Output = Result<Subscription, E>>,
    {
        self.subscribed
            .get_or_try_init(|| async {
                let sub = subscribe(self.pattern()).await?;
                tokio::spawn(route(sub, Arc::clone(&self.waiting)));
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// A new request's number, inbox topic and the receiver of its reply.
    pub(crate) fn open(&self) -> (u64, String, oneshot::Receiver<Message>) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(n, tx);
        (n, format!("{INBOX_PREFIX}.{}.{n}", self.token), rx)
    }

    /// Forgets request `n` (answered, refused or timed out).
    pub(crate) fn close(&self, n: u64) {
        self.waiting.lock().remove(&n);
    }
}

/// Hands each reply on the inbox subscription to the request its topic's last token numbers.
async fn route(mut sub: Subscription, waiting: Waiting) {
    while let Some(event) = sub.next_event().await {
        let Ok(event) = event else { continue };
        let Some(n) = event
            .topic
            .rsplit('.')
            .next()
            .and_then(|t| t.parse::<u64>().ok())
        else {
            continue;
        };
        if let Some(tx) = waiting.lock().remove(&n) {
            let _ = tx.send(Message {
                payload: event.payload,
                headers: event.headers,
            });
        }
    }
}
