//! The publish pool: `pub_conn_pool` connections × `pub_streams_per_conn`
//! publish streams. A topic always hashes to the same stream, so one client's
//! publishes to one topic stay in order. Each stream's fire-and-forget publishes stay within
//! the client's publish window ([`crate::window`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use starling_proto::{
    AckMode, Frame, Header, IndexedHeaders, Publish, PublishBatch, features, headers_len,
    indexed_headers_len,
};

use crate::ClientError;
use crate::connector::{Conn, Connector};
use crate::error::ProtocolError;
use crate::routing::topic_slot;
use crate::rpc::RpcStream;
use crate::slot::{Alive, LazySlot, slots};
use crate::transport::ConnKind;

impl Alive for Conn {
    fn is_alive(&self) -> bool {
        Conn::is_alive(self)
    }
}

/// Publish connections and streams.
pub(crate) struct Publisher {
    conns: Vec<LazySlot<Conn>>,
    streams: Vec<LazySlot<Arc<RpcStream>>>,
    streams_per_conn: usize,
    window: Option<u64>,
}

impl Publisher {
    /// An empty pool of `conns × streams_per_conn` streams, each with a publish window of
    /// `window` bytes (`None`: unbounded).
    pub(crate) fn new(conns: u32, streams_per_conn: u32, window: Option<u64>) -> Self {
        let conns = usize::try_from(conns).unwrap_or(1).max(1);
        let per = usize::try_from(streams_per_conn).unwrap_or(1).max(1);
        Publisher {
            conns: slots(conns),
            streams: slots(conns * per),
            streams_per_conn: per,
            window,
        }
    }

    /// Seeds connection slot 0 with the connection opened by `Client::connect`.
    pub(crate) fn seed(&self, conn: Conn) {
        if let Some(slot) = self.conns.first() {
            slot.set(conn);
        }
    }

    /// Publishes one payload with its headers (none when empty); with `acked`, waits for the
    /// server's ack. Headers need a connection granted `HEADERS` ([`ClientError::Unsupported`]
    /// otherwise: an older broker would refuse the frame).
    pub(crate) async fn publish(
        &self,
        connector: &Connector,
        topic: &str,
        payload: Bytes,
        headers: Vec<Header>,
        acked: bool,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let stream = self.stream_for(connector, topic).await?;
        if !headers.is_empty() && !stream.info().has_feature(features::HEADERS) {
            return Err(ClientError::Unsupported(
                "message headers (the broker did not grant HEADERS; it is older than this \
                 client)"
                    .into(),
            ));
        }
        if crate::message::has_msg_id(&headers) && !stream.info().has_feature(features::DEDUP) {
            return Err(ClientError::Unsupported(
                "publish de-duplication by message id (the broker did not grant DEDUP; it \
                 would deliver a repeat)"
                    .into(),
            ));
        }
        let header_bytes = if headers.is_empty() {
            0
        } else {
            headers_len(&headers)
        };
        let len = frame_cost(topic, payload.len()).saturating_add(header_bytes);
        let build = |request_id, ack| {
            Frame::Publish(Publish {
                request_id,
                ack,
                topic: topic.to_string(),
                payload,
                headers,
            })
        };
        if acked {
            expect_ack(stream.call(|id| build(id, AckMode::Ack), timeout).await?)
        } else {
            stream.send(len, build, timeout).await
        }
    }

    /// Publishes several payloads to one topic in one frame (or one frame each
    /// when the server did not grant batch publishing).
    pub(crate) async fn publish_batch(
        &self,
        connector: &Connector,
        topic: &str,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
        acked: bool,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let stream = self.stream_for(connector, topic).await?;
        check_batch_headers(&stream, &headers)?;
        if !stream_has_batch(&stream) {
            for (payload, headers) in payloads.into_iter().zip(per_message(headers)) {
                self.publish(connector, topic, payload, headers, acked, timeout)
                    .await?;
            }
            return Ok(());
        }
        let len = frame_cost(topic, payloads.iter().map(Bytes::len).sum())
            .saturating_add(indexed_headers_len(&headers));
        let build = |request_id, ack| {
            Frame::PublishBatch(PublishBatch {
                request_id,
                ack,
                topic: topic.to_string(),
                payloads,
                headers,
            })
        };
        if acked {
            expect_ack(stream.call(|id| build(id, AckMode::Ack), timeout).await?)
        } else {
            stream.send(len, build, timeout).await
        }
    }

    /// Queues one acked batch on the topic's stream (in call order) and returns a future for
    /// the server's ack.
    pub(crate) async fn publish_batch_deferred(
        &self,
        connector: &Connector,
        topic: &str,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
        timeout: Duration,
    ) -> Result<impl Future<Output = Result<(), ClientError>> + Send + 'static, ClientError> {
        let stream = self.stream_for(connector, topic).await?;
        check_batch_headers(&stream, &headers)?;
        let mut acks: Vec<futures::future::BoxFuture<'static, Result<Frame, ClientError>>> =
            Vec::new();
        if stream_has_batch(&stream) {
            let build = |request_id| {
                Frame::PublishBatch(PublishBatch {
                    request_id,
                    ack: AckMode::Ack,
                    topic: topic.to_string(),
                    payloads,
                    headers,
                })
            };
            acks.push(Box::pin(stream.call_deferred(build, timeout).await?));
        } else {
            for (payload, headers) in payloads.into_iter().zip(per_message(headers)) {
                let build = |request_id| {
                    Frame::Publish(Publish {
                        request_id,
                        ack: AckMode::Ack,
                        topic: topic.to_string(),
                        payload,
                        headers,
                    })
                };
                acks.push(Box::pin(stream.call_deferred(build, timeout).await?));
            }
        }
        Ok(async move {
            for ack in acks {
                expect_ack(ack.await?)?;
            }
            Ok(())
        })
    }

    /// Flushes and finishes every open publish stream, then closes the connections.
    pub(crate) async fn close(&self, timeout: Duration) {
        let open: Vec<Arc<RpcStream>> = self.streams.iter().filter_map(LazySlot::take).collect();
        futures::future::join_all(open.iter().map(|s| s.finish(timeout))).await;
        for conn in self.conns.iter().filter_map(LazySlot::take) {
            conn.quic.close(0u32.into(), b"client closed");
        }
    }

    async fn stream_for(
        &self,
        connector: &Connector,
        topic: &str,
    ) -> Result<Arc<RpcStream>, ClientError> {
        let slot = topic_slot(topic, self.conns.len(), self.streams_per_conn);
        let (Some(stream_slot), Some(conn_slot)) =
            (self.streams.get(slot.stream), self.conns.get(slot.conn))
        else {
            return Err(ClientError::Config("empty publish pool".into()));
        };
        stream_slot
            .get_or_open(|| async {
                let conn = conn_slot
                    .get_or_open(|| connector.connect(ConnKind::Publish))
                    .await?;
                connector
                    .bounded(RpcStream::open_windowed(&conn, self.window))
                    .await
            })
            .await
    }
}

fn stream_has_batch(stream: &RpcStream) -> bool {
    stream.info().has_feature(features::BATCH_PUBLISH)
}

/// What a publish of `payload` bytes to `topic` counts against the publish window: its
/// payload and topic, plus a frame header's worth.
fn frame_cost(topic: &str, payload: usize) -> usize {
    payload.saturating_add(topic.len()).saturating_add(16)
}

fn expect_ack(frame: Frame) -> Result<(), ClientError> {
    match frame {
        Frame::PublishAck(_) => Ok(()),
        other => Err(ProtocolError::UnexpectedFrame {
            expected: "publish_ack",
            got: other.name(),
        }
        .into()),
    }
}

/// A batch's headers need a stream granted `HEADERS` (and `DEDUP` for a message id), as
/// [`Publisher::publish`] checks for one message.
fn check_batch_headers(stream: &RpcStream, headers: &[IndexedHeaders]) -> Result<(), ClientError> {
    if headers.is_empty() {
        return Ok(());
    }
    if !stream.info().has_feature(features::HEADERS) {
        return Err(ClientError::Unsupported(
            "message headers (the broker did not grant HEADERS; it is older than this client)"
                .into(),
        ));
    }
    if headers
        .iter()
        .any(|h| crate::message::has_msg_id(&h.headers))
        && !stream.info().has_feature(features::DEDUP)
    {
        return Err(ClientError::Unsupported(
            "publish de-duplication by message id (the broker did not grant DEDUP; it would \
             deliver a repeat)"
                .into(),
        ));
    }
    Ok(())
}

/// Indexed headers as one list per message, in order, forever (empty past the last): zipped
/// with a batch's payloads.
fn per_message(headers: Vec<IndexedHeaders>) -> impl Iterator<Item = Vec<Header>> {
    let mut headers = headers.into_iter().peekable();
    (0u32..).map(move |i| {
        headers
            .next_if(|h| h.index == i)
            .map(|h| h.headers)
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{CacheOk, PublishAck};

    #[test]
    fn pool_shape_follows_tuning() {
        let p = Publisher::new(4, 2, None);
        assert_eq!(
            (p.conns.len(), p.streams.len(), p.streams_per_conn),
            (4, 8, 2)
        );
        let empty = Publisher::new(0, 0, Some(1 << 20));
        assert_eq!((empty.conns.len(), empty.streams.len()), (1, 1));
    }

    #[test]
    fn only_publish_acks_count_as_acks() {
        let ack = Frame::PublishAck(PublishAck {
            request_id: 1,
            count: 1,
        });
        assert!(expect_ack(ack).is_ok());
        let wrong = Frame::CacheOk(CacheOk {
            request_id: 1,
            existed: true,
        });
        assert!(expect_ack(wrong).is_err());
        assert_eq!(frame_cost("t", 100), 117);
    }
}
