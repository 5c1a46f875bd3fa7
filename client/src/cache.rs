//! The cache pool: up to `cache_conn_pool` connections (ALPN `starling-cache/1`) ×
//! `cache_streams_per_conn` request/response streams, operations pipelined on each.
//!
//! Streams are filled in order ([`fill_first`]): an operation goes to the first stream (the
//! first connection's streams first) with fewer than `cache_stream_depth` operations in flight,
//! and the pool's later streams and connections are opened only when concurrency needs them.
//! Operations that share a stream share its writes, and the broker answers what one read
//! brought in with one write, so several requests and answers travel in one datagram. Spread
//! one per stream instead (round-robin, before), each operation cost a datagram and a system
//! call each way, which made the cache half as fast on the benchmark machine (measured in
//! docs/benchmarks/optimisation-log.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use starling_proto::{CacheDelete, CacheGet, CachePut, Frame, validate_key};

use crate::ClientError;
use crate::connector::{Conn, Connector};
use crate::error::ProtocolError;
use crate::routing::{StreamSlot, fill_first};
use crate::rpc::RpcStream;
use crate::slot::{LazySlot, slots};
use crate::transport::ConnKind;

/// Cache connections and streams.
pub(crate) struct CachePool {
    conns: Vec<LazySlot<Conn>>,
    streams: Vec<LazySlot<Arc<RpcStream>>>,
    /// Operations in flight on each stream.
    loads: Vec<AtomicUsize>,
    streams_per_conn: usize,
    depth: usize,
}

impl CachePool {
    /// An empty pool of `conns × streams_per_conn` streams, each carrying up to `depth`
    /// operations before the next one is used.
    pub(crate) fn new(conns: u32, streams_per_conn: u32, depth: u32) -> Self {
        let conns = usize::try_from(conns).unwrap_or(1).max(1);
        let per = usize::try_from(streams_per_conn).unwrap_or(1).max(1);
        CachePool {
            conns: slots(conns),
            streams: slots(conns * per),
            loads: (0..conns * per).map(|_| AtomicUsize::new(0)).collect(),
            streams_per_conn: per,
            depth: usize::try_from(depth).unwrap_or(usize::MAX).max(1),
        }
    }

    /// Stores `value` under `key`, expiring after `ttl` when given.
    pub(crate) async fn put(
        &self,
        connector: &Connector,
        key: Bytes,
        value: Bytes,
        ttl: Option<Duration>,
        timeout: Duration,
    ) -> Result<bool, ClientError> {
        check_key(&key)?;
        let ttl_ms = ttl_millis(ttl);
        let (_in_flight, stream) = self.stream(connector).await?;
        let build = |request_id| {
            Frame::CachePut(CachePut {
                request_id,
                key,
                value,
                ttl_ms,
            })
        };
        match stream.call(build, timeout).await? {
            Frame::CacheOk(ok) => Ok(ok.existed),
            other => Err(unexpected("cache_ok", &other)),
        }
    }

    /// The value under `key`, if any.
    pub(crate) async fn get(
        &self,
        connector: &Connector,
        key: Bytes,
        timeout: Duration,
    ) -> Result<Option<Bytes>, ClientError> {
        check_key(&key)?;
        let (_in_flight, stream) = self.stream(connector).await?;
        let build = |request_id| Frame::CacheGet(CacheGet { request_id, key });
        match stream.call(build, timeout).await? {
            Frame::CacheValue(v) => Ok(v.value),
            other => Err(unexpected("cache_value", &other)),
        }
    }

    /// Deletes `key`; `true` when it existed.
    pub(crate) async fn delete(
        &self,
        connector: &Connector,
        key: Bytes,
        timeout: Duration,
    ) -> Result<bool, ClientError> {
        check_key(&key)?;
        let (_in_flight, stream) = self.stream(connector).await?;
        let build = |request_id| Frame::CacheDelete(CacheDelete { request_id, key });
        match stream.call(build, timeout).await? {
            Frame::CacheOk(ok) => Ok(ok.existed),
            other => Err(unexpected("cache_ok", &other)),
        }
    }

    /// Closes every cache connection.
    pub(crate) fn close(&self) {
        for stream in self.streams.iter() {
            stream.take();
        }
        for conn in self.conns.iter().filter_map(LazySlot::take) {
            conn.quic.close(0u32.into(), b"client closed");
        }
    }

    /// The stream for a new operation, with the guard that counts it in flight there until
    /// the operation is done.
    async fn stream(
        &self,
        connector: &Connector,
    ) -> Result<(InFlight<'_>, Arc<RpcStream>), ClientError> {
        let index = fill_first(
            self.loads.iter().map(|l| l.load(Ordering::Relaxed)),
            self.depth,
        );
        let in_flight = InFlight::enter(&self.loads, index);
        let slot = StreamSlot::from_index(index, self.conns.len(), self.streams_per_conn);
        let (Some(stream_slot), Some(conn_slot)) =
            (self.streams.get(slot.stream), self.conns.get(slot.conn))
        else {
            return Err(ClientError::Config("empty cache pool".into()));
        };
        let stream = stream_slot
            .get_or_open(|| async {
                let conn = conn_slot
                    .get_or_open(|| connector.connect(ConnKind::Cache))
                    .await?;
                connector.bounded(RpcStream::open(&conn)).await
            })
            .await?;
        Ok((in_flight, stream))
    }
}

/// Counts one operation in flight on a stream of the pool, from its placement until it is
/// answered, fails or is cancelled.
struct InFlight<'a>(Option<&'a AtomicUsize>);

impl<'a> InFlight<'a> {
    fn enter(loads: &'a [AtomicUsize], index: usize) -> Self {
        let load = loads.get(index);
        if let Some(load) = load {
            load.fetch_add(1, Ordering::Relaxed);
        }
        InFlight(load)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(load) = self.0 {
            load.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn check_key(key: &[u8]) -> Result<(), ClientError> {
    validate_key(key).map_err(|why| ClientError::InvalidKey(why.to_string()))
}

/// The wire TTL: 0 means none, so a sub-millisecond TTL rounds up to 1 ms.
fn ttl_millis(ttl: Option<Duration>) -> u64 {
    match ttl {
        None => 0,
        Some(d) => u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1),
    }
}

fn unexpected(expected: &'static str, got: &Frame) -> ClientError {
    ProtocolError::UnexpectedFrame {
        expected,
        got: got.name(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_encoding() {
        assert_eq!(ttl_millis(None), 0);
        assert_eq!(ttl_millis(Some(Duration::ZERO)), 1);
        assert_eq!(ttl_millis(Some(Duration::from_micros(10))), 1);
        assert_eq!(ttl_millis(Some(Duration::from_secs(30))), 30_000);
        assert_eq!(ttl_millis(Some(Duration::MAX)), u64::MAX);
    }

    #[test]
    fn keys_are_validated_locally() {
        assert!(matches!(check_key(b""), Err(ClientError::InvalidKey(_))));
        assert!(check_key(b"k").is_ok());
    }

    #[test]
    fn pool_shape_follows_tuning() {
        let p = CachePool::new(8, 4, 64);
        assert_eq!((p.conns.len(), p.streams.len(), p.loads.len()), (8, 32, 32));
    }

    #[test]
    fn in_flight_counts_until_dropped() {
        let loads: Vec<AtomicUsize> = (0..2).map(|_| AtomicUsize::new(0)).collect();
        let a = InFlight::enter(&loads, 1);
        let b = InFlight::enter(&loads, 1);
        assert_eq!(loads[1].load(Ordering::Relaxed), 2);
        drop(a);
        assert_eq!(loads[1].load(Ordering::Relaxed), 1);
        drop(b);
        assert_eq!(loads[1].load(Ordering::Relaxed), 0);
        // Out of range counts nothing and does not panic.
        drop(InFlight::enter(&loads, 7));
        assert!(loads.iter().all(|l| l.load(Ordering::Relaxed) == 0));
    }
}
