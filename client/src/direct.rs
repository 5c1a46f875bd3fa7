//! [`Direct`]: the SDK's pools to ONE broker, for a program that does the routing and the
//! resubscribing itself. A [`Client`](crate::Client) routes every request to the member that
//! owns it and carries a subscription across the ends of its streams; a [`Direct`] link does
//! neither: everything goes to the broker it was opened to, a subscription ends when its
//! stream does, and any request frame can be sent on a stream of its own
//! ([`Direct::exchange`]). The connection asks for the role its caller names
//! ([`starling_proto::Role`]); what the role allows is the broker's decision (a broker grants
//! `Peer` only to its members' peer certificate). A broker's links to the other members are
//! built on it (`starling_broker::cluster::peer_client`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use starling_proto::{ClusterInfo, Frame, IndexedHeaders, Role, StartAt};

use crate::ClientError;
use crate::checks::check_topic;
use crate::config::ClientConfig;
use crate::handshake::ServerInfo;
use crate::node::Node;
use crate::subscription::Subscription;

/// Pools to one broker, unrouted and without resubscription. Clones share the pools.
#[derive(Clone)]
pub struct Direct {
    node: Arc<Node>,
    closed: Arc<AtomicBool>,
}

impl Direct {
    /// Connects and handshakes one connection to `cfg.server` as `role` right away (a bad
    /// address, certificate, protocol version or refused role fails here); every other
    /// connection and stream is opened on first use. `cfg.cluster_routing` is not used.
    pub async fn connect(cfg: ClientConfig, role: Role) -> Result<Direct, ClientError> {
        cfg.validate()?;
        let node = Node::connect(&cfg, role).await?;
        Ok(Direct {
            node: Arc::new(node),
            closed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// What the broker said about itself in the first handshake.
    pub fn server_info(&self) -> &ServerInfo {
        self.node.info()
    }

    /// Publishes several messages to one topic in one frame, as
    /// [`Client::publish_batch`](crate::Client::publish_batch) does, at this broker.
    pub async fn publish_batch(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
        acked: bool,
    ) -> Result<(), ClientError> {
        self.publish_batch_with_headers(topic, payloads, Vec::new(), acked)
            .await
    }

    /// [`publish_batch`](Self::publish_batch) with the messages' headers, by index into
    /// `payloads` (a forwarded request keeps its headers).
    pub async fn publish_batch_with_headers(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
        acked: bool,
    ) -> Result<(), ClientError> {
        check_topic(topic)?;
        self.open()?
            .publish_batch(topic, payloads, headers, acked)
            .await
    }

    /// Queues an acked batch now and returns a future for its ack, as
    /// [`Client::publish_batch_pipelined`](crate::Client::publish_batch_pipelined) does.
    pub async fn publish_batch_pipelined(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
    ) -> Result<impl Future<Output = Result<(), ClientError>> + Send + 'static, ClientError> {
        self.open()?
            .publish_batch_pipelined(topic, payloads, headers)
            .await
    }

    /// A subscription at this broker from `start`, which ends when its stream ends (the broker
    /// drained or restarted, the topic's owner moved, the connection broke): the caller
    /// subscribes again if it wants to.
    pub async fn subscribe_at(
        &self,
        topic: &str,
        start: StartAt,
    ) -> Result<Subscription, ClientError> {
        check_topic(topic)?;
        self.open()?.subscribe(topic, start, None).await
    }

    /// A live member of queue group `group` of `topic_or_pattern` at this broker, which ends
    /// when its stream ends, as [`Direct::subscribe_at`]'s does.
    pub async fn subscribe_group(
        &self,
        topic_or_pattern: &str,
        group: &str,
    ) -> Result<Subscription, ClientError> {
        check_topic(topic_or_pattern)?;
        starling_proto::validate_group(group)
            .map_err(|why| ClientError::InvalidGroup(format!("{group:?}: {why}")))?;
        self.open()?
            .subscribe(topic_or_pattern, StartAt::Live, Some(group))
            .await
    }

    /// Stores `value` under `key` at this broker; `true` when it replaced a live value.
    pub async fn cache_put(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        ttl: Option<Duration>,
    ) -> Result<bool, ClientError> {
        self.open()?.cache_put(key.into(), value.into(), ttl).await
    }

    /// The value under `key` at this broker.
    pub async fn cache_get(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>, ClientError> {
        self.open()?.cache_get(key.into()).await
    }

    /// Deletes `key` at this broker; `true` when it existed.
    pub async fn cache_delete(&self, key: impl Into<Bytes>) -> Result<bool, ClientError> {
        self.open()?.cache_delete(key.into()).await
    }

    /// The cluster's membership as this broker sees it now.
    pub async fn cluster_info(&self) -> Result<ClusterInfo, ClientError> {
        self.open()?.cluster_info().await
    }

    /// Sends `request` on a stream of its own and reads the one frame that answers it, of up
    /// to `frames` times the broker's frame limit, all within `timeout`. An `Error` answer is
    /// [`ClientError::Server`] (or [`ClientError::Unauthorized`]); a stream that ends without
    /// an answer is a protocol error naming `answer`, the frame expected. Whether the answer
    /// is the right kind of frame is the caller's to check.
    pub async fn exchange(
        &self,
        request: Frame,
        answer: &'static str,
        frames: u32,
        timeout: Duration,
    ) -> Result<Frame, ClientError> {
        self.open()?
            .exchange(request, answer, frames, timeout)
            .await
    }

    /// The limit on one request (`ClientConfig::request_timeout`).
    pub fn request_timeout(&self) -> Duration {
        self.node.request_timeout()
    }

    /// Flushes queued publishes, then closes every connection. Later calls on any clone fail
    /// with [`ClientError::Closed`]; open subscriptions end.
    pub async fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.node.close().await;
    }

    fn open(&self) -> Result<&Node, ClientError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        Ok(&self.node)
    }
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("server_id", &self.node.info().server_id)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
