//! [`Node`]: the three pools (publish, events, cache) to ONE broker, sharing one QUIC endpoint,
//! plus one-request streams on its control connection (the `ClusterInfo` query, and any
//! request a [`Direct`](crate::Direct) link sends). [`Client`](crate::Client) routes over one
//! node per cluster member.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_proto::{
    ClusterInfo, ClusterInfoRequest, Frame, FrameDecoder, Header, IndexedHeaders, read_frame,
};

use crate::ClientError;
use crate::cache::CachePool;
use crate::checks::check_topic;
use crate::config::ClientConfig;
use crate::connector::{Conn, Connector};
use crate::error::{Operation, ProtocolError};
use crate::handshake::{Role, ServerInfo};
use crate::publisher::Publisher;
use crate::slot::LazySlot;
use crate::subscriber::Subscriber;
use crate::subscription::Subscription;
use crate::transport::ConnKind;

/// How long [`Node::close`] waits for close frames to go out.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// Pools to one broker.
pub(crate) struct Node {
    connector: Connector,
    info: ServerInfo,
    control: LazySlot<Conn>,
    publisher: Publisher,
    subscriber: Subscriber,
    cache: CachePool,
    request_timeout: Duration,
}

impl Node {
    /// Connects and handshakes one publish connection right away, so a bad address,
    /// certificate or protocol version fails here; everything else opens on first use.
    pub(crate) async fn connect(cfg: &ClientConfig, role: Role) -> Result<Node, ClientError> {
        let connector = Connector::new(cfg, role).await?;
        let first = connector.connect(ConnKind::Publish).await?;
        let info = ServerInfo::clone(&first.info);
        let t = cfg.tuning;
        let publisher = Publisher::new(
            t.pub_conn_pool,
            t.pub_streams_per_conn,
            cfg.publish_window_bytes,
        );
        let control = LazySlot::default();
        control.set(first.clone());
        publisher.seed(first);
        Ok(Node {
            connector,
            info,
            control,
            publisher,
            subscriber: Subscriber::new(t.event_conn_pool),
            cache: CachePool::new(
                t.cache_conn_pool,
                t.cache_streams_per_conn,
                cfg.cache_stream_depth,
            ),
            request_timeout: cfg.request_timeout,
        })
    }

    /// What the broker said in the first handshake.
    pub(crate) fn info(&self) -> &ServerInfo {
        &self.info
    }

    /// The limit on one request.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    // Every request below names its operation and topic or key in a `Forbidden` answer
    // (`ClientError::in_operation`): the layers beneath only see an `Error` frame.

    /// One message, acked or fire-and-forget.
    pub(crate) async fn publish(
        &self,
        topic: &str,
        payload: Bytes,
        headers: Vec<Header>,
        acked: bool,
    ) -> Result<(), ClientError> {
        self.publisher
            .publish(
                &self.connector,
                topic,
                payload,
                headers,
                acked,
                self.request_timeout,
            )
            .await
            .map_err(|e| e.in_operation(Operation::Publish, topic.as_bytes()))
    }

    /// Several messages to one topic in one frame.
    pub(crate) async fn publish_batch(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
        acked: bool,
    ) -> Result<(), ClientError> {
        self.publisher
            .publish_batch(
                &self.connector,
                topic,
                payloads,
                headers,
                acked,
                self.request_timeout,
            )
            .await
            .map_err(|e| e.in_operation(Operation::Publish, topic.as_bytes()))
    }

    /// An acked batch queued now, its ack awaited by the future returned (the order on the
    /// wire is the call order); the topic is checked first.
    pub(crate) async fn publish_batch_pipelined(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
    ) -> Result<impl Future<Output = Result<(), ClientError>> + Send + 'static, ClientError> {
        check_topic(topic)?;
        let name = topic.to_string();
        let ack = self
            .publisher
            .publish_batch_deferred(
                &self.connector,
                topic,
                payloads,
                headers,
                self.request_timeout,
            )
            .await
            .map_err(|e| e.in_operation(Operation::Publish, name.as_bytes()))?;
        Ok(async move {
            ack.await
                .map_err(|e| e.in_operation(Operation::Publish, name.as_bytes()))
        })
    }

    /// A subscription on this broker, starting at `start`.
    pub(crate) async fn subscribe(
        &self,
        topic: &str,
        start: starling_proto::StartAt,
        group: Option<&str>,
    ) -> Result<Subscription, ClientError> {
        self.subscriber
            .subscribe(&self.connector, topic, start, group, self.request_timeout)
            .await
            .map_err(|e| e.in_operation(Operation::Subscribe, topic.as_bytes()))
    }

    /// A durable consumer member on this broker.
    pub(crate) async fn consume(
        &self,
        open: starling_proto::ConsumerOpen,
    ) -> Result<crate::consumer::Consumer, ClientError> {
        let topic = open.topic.clone();
        self.subscriber
            .consume(&self.connector, open, self.request_timeout)
            .await
            .map_err(|e| e.in_operation(Operation::Subscribe, topic.as_bytes()))
    }

    /// Cache put.
    pub(crate) async fn cache_put(
        &self,
        key: Bytes,
        value: Bytes,
        ttl: Option<Duration>,
    ) -> Result<bool, ClientError> {
        self.cache
            .put(
                &self.connector,
                key.clone(),
                value,
                ttl,
                self.request_timeout,
            )
            .await
            .map_err(|e| e.in_operation(Operation::CacheWrite, &key))
    }

    /// Cache get.
    pub(crate) async fn cache_get(&self, key: Bytes) -> Result<Option<Bytes>, ClientError> {
        self.cache
            .get(&self.connector, key.clone(), self.request_timeout)
            .await
            .map_err(|e| e.in_operation(Operation::CacheRead, &key))
    }

    /// Cache delete.
    pub(crate) async fn cache_delete(&self, key: Bytes) -> Result<bool, ClientError> {
        self.cache
            .delete(&self.connector, key.clone(), self.request_timeout)
            .await
            .map_err(|e| e.in_operation(Operation::CacheWrite, &key))
    }

    /// Asks the broker for the cluster's membership on a short-lived stream.
    pub(crate) async fn cluster_info(&self) -> Result<ClusterInfo, ClientError> {
        let request = Frame::ClusterInfoRequest(ClusterInfoRequest { request_id: 1 });
        match self.one_shot(request, "cluster_info", 1).await? {
            Frame::ClusterInfo(info) => Ok(info),
            other => Err(unexpected("cluster_info", &other)),
        }
    }

    /// Sends `request` on a short-lived stream of the control connection and reads one answer
    /// (frames of up to `frames` times the broker's frame limit); an `Error` answer is
    /// [`ClientError::Server`].
    async fn one_shot(
        &self,
        request: Frame,
        expected: &'static str,
        frames: u32,
    ) -> Result<Frame, ClientError> {
        self.exchange(request, expected, frames, self.request_timeout)
            .await
    }

    /// [`Node::one_shot`] within `timeout` instead of the request timeout.
    pub(crate) async fn exchange(
        &self,
        request: Frame,
        expected: &'static str,
        frames: u32,
        timeout: Duration,
    ) -> Result<Frame, ClientError> {
        let conn = self
            .control
            .get_or_open(|| self.connector.connect(ConnKind::Publish))
            .await?;
        let query = async {
            let (mut send, mut recv) = conn.quic.open_bi().await?;
            send.write_all(&request.to_bytes()).await?;
            let mut buf = BytesMut::new();
            let limit = conn.info.max_frame_bytes.saturating_mul(frames);
            let decoder = FrameDecoder::new(limit.saturating_add(64 * 1024));
            let answer = read_frame(&mut recv, &mut buf, &decoder, 64 * 1024).await?;
            let _ = send.finish();
            match answer {
                Some(Frame::Error(e)) => Err(ClientError::server(e)),
                Some(frame) => Ok(frame),
                None => Err(ProtocolError::EndedEarly(expected).into()),
            }
        };
        tokio::time::timeout(timeout, query)
            .await
            .map_err(|_| ClientError::Timeout)?
    }

    /// Flushes queued publishes, then closes every connection.
    pub(crate) async fn close(&self) {
        self.publisher.close(self.request_timeout).await;
        self.subscriber.close();
        self.cache.close();
        if let Some(conn) = self.control.take() {
            conn.quic.close(0u32.into(), b"client closed");
        }
        let _ = tokio::time::timeout(CLOSE_LINGER, self.connector.endpoint().wait_idle()).await;
    }
}

/// The error for an answer of the wrong kind.
fn unexpected(expected: &'static str, got: &Frame) -> ClientError {
    ProtocolError::UnexpectedFrame {
        expected,
        got: got.name(),
    }
    .into()
}
