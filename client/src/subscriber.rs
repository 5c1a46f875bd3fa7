//! The subscription pool: `event_conn_pool` connections, each subscription
//! on its own bidirectional stream, spread round-robin over the connections. A subscription
//! from a time is sent only on a connection that was granted `SUBSCRIBE_FROM_TIME`, a
//! wildcard one (`orders.*`) only on one granted `WILDCARDS`, and only live.

use std::time::Duration;

use bytes::BytesMut;
use starling_proto::{
    Frame, StartAt, Subscribe, SubscribeOk, features, is_subscription_pattern, read_frame,
};
use tokio::sync::{mpsc, oneshot};

use crate::ClientError;
use crate::connector::{Conn, Connector};
use crate::error::ProtocolError;
use crate::feed::BATCH_BUFFER;
use crate::pump::{SubscriptionIo, pump};
use crate::routing::RoundRobin;
use crate::slot::{LazySlot, slots};
use crate::subscription::Subscription;
use crate::transport::ConnKind;

/// Event connections.
pub(crate) struct Subscriber {
    conns: Vec<LazySlot<Conn>>,
    next: RoundRobin,
}

impl Subscriber {
    /// An empty pool of `conns` connections.
    pub(crate) fn new(conns: u32) -> Self {
        Subscriber {
            conns: slots(usize::try_from(conns).unwrap_or(1)),
            next: RoundRobin::default(),
        }
    }

    /// Opens a subscription; returns once the server accepted it.
    pub(crate) async fn subscribe(
        &self,
        connector: &Connector,
        topic: &str,
        start: StartAt,
        group: Option<&str>,
        timeout: Duration,
    ) -> Result<Subscription, ClientError> {
        let index = self.next.next(self.conns.len());
        let slot = self
            .conns
            .get(index)
            .ok_or_else(|| ClientError::Config("empty event pool".into()))?;
        let conn = slot
            .get_or_open(|| connector.connect(ConnKind::Events))
            .await?;
        let open = open_subscription(&conn, topic, start, group, timeout);
        tokio::time::timeout(timeout, open)
            .await
            .map_err(|_| ClientError::Timeout)?
    }

    /// Opens a durable consumer member on one of the event connections.
    pub(crate) async fn consume(
        &self,
        connector: &Connector,
        open: starling_proto::ConsumerOpen,
        timeout: Duration,
    ) -> Result<crate::consumer::Consumer, ClientError> {
        let index = self.next.next(self.conns.len());
        let slot = self
            .conns
            .get(index)
            .ok_or_else(|| ClientError::Config("empty event pool".into()))?;
        let conn = slot
            .get_or_open(|| connector.connect(ConnKind::Events))
            .await?;
        crate::consumer::open(&conn, open, timeout).await
    }

    /// Closes every event connection (open subscriptions end).
    pub(crate) fn close(&self) {
        for conn in self.conns.iter().filter_map(LazySlot::take) {
            conn.quic.close(0u32.into(), b"client closed");
        }
    }
}

async fn open_subscription(
    conn: &Conn,
    topic: &str,
    start: StartAt,
    group: Option<&str>,
    request_timeout: Duration,
) -> Result<Subscription, ClientError> {
    check_start(conn.info.features, start)?;
    check_pattern(conn.info.features, topic, start)?;
    check_group(conn.info.features, group)?;
    let (mut send, mut recv) = conn.quic.open_bi().await?;
    let request = Frame::Subscribe(Subscribe {
        group: group.map(str::to_string),
        request_id: 1,
        topic: topic.to_string(),
        start,
    });
    send.write_all(&request.to_bytes()).await?;
    let mut buf = BytesMut::new();
    let decoder = conn.info.decoder();
    let first = read_frame(&mut recv, &mut buf, &decoder, 4096).await?;
    let ok = accepted(first)?;
    let (tx, rx) = mpsc::channel(BATCH_BUFFER);
    let (stop_tx, stop_rx) = oneshot::channel();
    let io = SubscriptionIo {
        send,
        recv,
        buf,
        decoder,
        subscription_id: ok.subscription_id,
        write_timeout: request_timeout,
    };
    tokio::spawn(pump(io, tx, stop_rx));
    let sub = Subscription::new(
        ok.subscription_id,
        topic.to_string(),
        rx,
        stop_tx,
        request_timeout,
        start.position(),
    );
    Ok(if group.is_some() { sub.in_group() } else { sub })
}

/// Refuses a queue-group subscription the broker cannot take: it needs `QUEUE_GROUPS`
/// granted (an older broker would reject the group as trailing bytes), and a valid name.
fn check_group(granted: u64, group: Option<&str>) -> Result<(), ClientError> {
    let Some(group) = group else {
        return Ok(());
    };
    if granted & features::QUEUE_GROUPS == 0 {
        return Err(ClientError::Unsupported(
            "queue groups (the broker did not grant QUEUE_GROUPS; it is older than this client)"
                .into(),
        ));
    }
    starling_proto::validate_group(group)
        .map_err(|why| ClientError::InvalidGroup(format!("{group:?}: {why}")))
}

/// Refuses a start the broker cannot take: a time needs `SUBSCRIBE_FROM_TIME` granted (an
/// older broker would reject the field as trailing bytes).
fn check_start(granted: u64, start: StartAt) -> Result<(), ClientError> {
    match start {
        StartAt::TimeMs(_) if granted & features::SUBSCRIBE_FROM_TIME == 0 => {
            Err(ClientError::Unsupported(
                "subscribing from a time (the broker did not grant SUBSCRIBE_FROM_TIME; it is \
                 older than this client)"
                    .into(),
            ))
        }
        _ => Ok(()),
    }
}

/// Refuses a wildcard subscription the broker cannot take: it needs `WILDCARDS` granted (an
/// older broker would take the pattern for a topic name), and starts live.
fn check_pattern(granted: u64, topic: &str, start: StartAt) -> Result<(), ClientError> {
    if !is_subscription_pattern(topic) {
        return Ok(());
    }
    if granted & features::WILDCARDS == 0 {
        return Err(ClientError::Unsupported(format!(
            "wildcard subscription {topic:?} (the broker did not grant WILDCARDS; it is older \
             than this client)"
        )));
    }
    if start != StartAt::Live {
        return Err(ClientError::InvalidTopic(format!(
            "{topic:?}: a wildcard subscription is live only (no resume position or start time)"
        )));
    }
    Ok(())
}

/// Interprets the server's answer to `Subscribe`.
fn accepted(frame: Option<Frame>) -> Result<SubscribeOk, ClientError> {
    match frame {
        Some(Frame::SubscribeOk(ok)) => Ok(ok),
        Some(Frame::Error(e)) => Err(ClientError::server(e)),
        Some(Frame::Moved(m)) => Err(ClientError::moved(m)),
        Some(other) => Err(ProtocolError::UnexpectedFrame {
            expected: "subscribe_ok",
            got: other.name(),
        }
        .into()),
        None => Err(ProtocolError::EndedEarly("subscribe_ok").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{ErrorCode, ErrorFrame};

    #[test]
    fn a_pattern_needs_the_feature_and_starts_live() {
        let all = features::WILDCARDS | features::SUBSCRIBE_FROM_TIME;
        assert!(check_pattern(all, "orders.*", StartAt::Live).is_ok());
        assert!(check_pattern(0, "orders", StartAt::Live).is_ok());
        let old = check_pattern(features::BASE, "orders.>", StartAt::Live);
        assert!(old.is_err_and(|e| e.is_unsupported()));
        let resumed = check_pattern(all, "orders.*", StartAt::TimeMs(5));
        assert!(
            matches!(resumed, Err(ClientError::InvalidTopic(_))),
            "{resumed:?}"
        );
    }

    #[test]
    fn a_time_needs_the_feature() {
        let time = StartAt::TimeMs(1);
        assert!(check_start(features::SUBSCRIBE_FROM_TIME, time).is_ok());
        let old = check_start(features::BATCH_PUBLISH | features::CACHE, time);
        assert!(matches!(old, Err(ClientError::Unsupported(_))), "{old:?}");
        assert!(old.is_err_and(|e| !e.is_transient() && e.is_unsupported()));
        let p = starling_proto::Position { stream: 1, seq: 0 };
        assert!(check_start(0, StartAt::Position(p)).is_ok());
        assert!(check_start(0, StartAt::Live).is_ok());
    }

    #[test]
    fn subscribe_answers() {
        let ok = Frame::SubscribeOk(SubscribeOk {
            request_id: 1,
            subscription_id: 42,
        });
        assert_eq!(accepted(Some(ok)).ok().map(|o| o.subscription_id), Some(42));
        let refused = Frame::Error(ErrorFrame {
            request_id: 1,
            code: ErrorCode::InvalidRequest,
            message: "bad topic".into(),
        });
        assert!(matches!(
            accepted(Some(refused)),
            Err(ClientError::Server { .. })
        ));
        assert!(matches!(
            accepted(None),
            Err(ClientError::Protocol(ProtocolError::EndedEarly(
                "subscribe_ok"
            )))
        ));
    }
}
