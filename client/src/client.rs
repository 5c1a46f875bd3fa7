//! [`Client`]: the SDK entry point. A cheap-to-clone handle over the three
//! pools (publish, events, cache) that share one QUIC endpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use starling_proto::validate_topic;

use crate::ClientError;
use crate::cache::CachePool;
use crate::config::ClientConfig;
use crate::connector::Connector;
use crate::handshake::ServerInfo;
use crate::publisher::Publisher;
use crate::subscriber::Subscriber;
use crate::subscription::Subscription;
use crate::transport::ConnKind;

/// How long [`Client::close`] waits for close frames to go out.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// A connection to one Starling broker. Clones share the same pools.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    connector: Connector,
    info: ServerInfo,
    publisher: Publisher,
    subscriber: Subscriber,
    cache: CachePool,
    request_timeout: Duration,
    closed: AtomicBool,
}

impl Client {
    /// Connects and handshakes one publish connection right away, so a bad
    /// address, certificate or protocol version fails here; every other
    /// connection and stream is opened on first use.
    pub async fn connect(cfg: ClientConfig) -> Result<Client, ClientError> {
        cfg.validate()?;
        let connector = Connector::new(&cfg).await?;
        let first = connector.connect(ConnKind::Publish).await?;
        let info = ServerInfo::clone(&first.info);
        let t = cfg.tuning;
        let publisher = Publisher::new(t.pub_conn_pool, t.pub_streams_per_conn);
        publisher.seed(first);
        Ok(Client {
            inner: Arc::new(Inner {
                connector,
                info,
                publisher,
                subscriber: Subscriber::new(t.event_conn_pool),
                cache: CachePool::new(t.cache_conn_pool, t.cache_streams_per_conn),
                request_timeout: cfg.request_timeout,
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// Publishes one message without waiting for the broker's ack. Returns once
    /// the message is queued on its stream (waits while the stream is backed up).
    pub async fn publish(&self, topic: &str, payload: impl Into<Bytes>) -> Result<(), ClientError> {
        self.publish_one(topic, payload.into(), false).await
    }

    /// Publishes one message and waits for the broker's ack.
    pub async fn publish_acked(
        &self,
        topic: &str,
        payload: impl Into<Bytes>,
    ) -> Result<(), ClientError> {
        self.publish_one(topic, payload.into(), true).await
    }

    /// One `Publish` frame, acked or fire-and-forget.
    async fn publish_one(
        &self,
        topic: &str,
        payload: Bytes,
        acked: bool,
    ) -> Result<(), ClientError> {
        let inner = self.open()?;
        check_topic(topic)?;
        inner
            .publisher
            .publish(
                &inner.connector,
                topic,
                payload,
                acked,
                inner.request_timeout,
            )
            .await
    }

    /// Publishes several messages to one topic in one frame; with `acked`,
    /// waits for the broker's ack of the whole batch.
    pub async fn publish_batch(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
        acked: bool,
    ) -> Result<(), ClientError> {
        let inner = self.open()?;
        check_topic(topic)?;
        inner
            .publisher
            .publish_batch(
                &inner.connector,
                topic,
                payloads,
                acked,
                inner.request_timeout,
            )
            .await
    }

    /// Subscribes to `topic`; returns once the broker accepted the subscription.
    pub async fn subscribe(&self, topic: &str) -> Result<Subscription, ClientError> {
        let inner = self.open()?;
        check_topic(topic)?;
        inner
            .subscriber
            .subscribe(&inner.connector, topic, inner.request_timeout)
            .await
    }

    /// Stores `value` under `key`, expiring after `ttl` when given.
    pub async fn cache_put(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        ttl: Option<Duration>,
    ) -> Result<(), ClientError> {
        let inner = self.open()?;
        inner
            .cache
            .put(
                &inner.connector,
                key.into(),
                value.into(),
                ttl,
                inner.request_timeout,
            )
            .await
    }

    /// The value under `key`, or `None` when absent or expired.
    pub async fn cache_get(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>, ClientError> {
        let inner = self.open()?;
        inner
            .cache
            .get(&inner.connector, key.into(), inner.request_timeout)
            .await
    }

    /// Deletes `key`; `true` when it existed.
    pub async fn cache_delete(&self, key: impl Into<Bytes>) -> Result<bool, ClientError> {
        let inner = self.open()?;
        inner
            .cache
            .delete(&inner.connector, key.into(), inner.request_timeout)
            .await
    }

    /// What the broker said about itself in the first handshake.
    pub fn server_info(&self) -> &ServerInfo {
        &self.inner.info
    }

    /// Flushes queued publishes (waiting up to the request timeout for the
    /// broker to read them), then closes every connection. Later calls on any
    /// clone fail with [`ClientError::Closed`]; open subscriptions end.
    pub async fn close(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        inner.publisher.close(inner.request_timeout).await;
        inner.subscriber.close();
        inner.cache.close();
        let _ = tokio::time::timeout(CLOSE_LINGER, inner.connector.endpoint().wait_idle()).await;
    }

    fn open(&self) -> Result<&Inner, ClientError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        Ok(&self.inner)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server_id", &self.inner.info.server_id)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn check_topic(topic: &str) -> Result<(), ClientError> {
    validate_topic(topic).map_err(|why| ClientError::InvalidTopic(format!("{topic:?}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_checked_before_sending() {
        assert!(check_topic("orders").is_ok());
        let err = check_topic("a b").map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("invalid topic: \"a b\": topic contains whitespace".into())
        );
    }
}
