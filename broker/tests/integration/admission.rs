//! Admission budgets over real QUIC: the connection cap, QUIC Retry during a handshake burst,
//! the first-frame timeout of streams, and a flood of streams each holding a partial frame of
//! the largest size. Each refusal is typed and counted, and a client inside the budgets keeps
//! being served.

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use starling_config::{ConfigOverrides, Profile};
use starling_proto::{ErrorCode, FRAMING_VERSION, Frame};

use crate::common::*;

fn refused(e: &quinn::ConnectionError) -> bool {
    matches!(e, quinn::ConnectionError::ConnectionClosed(c)
        if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED)
}

/// A Ping on a new stream of `conn` is answered.
async fn answers_ping(conn: &quinn::Connection) -> bool {
    let Ok((mut send, mut recv)) = conn.open_bi().await else {
        return false;
    };
    let ping = Frame::Ping(starling_proto::Ping { nonce: 7 });
    if starling_proto::write_frame(&mut send, &ping).await.is_err() {
        return false;
    }
    matches!(read_one(&mut recv).await, Some(Frame::Pong(p)) if p.nonce == 7)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_refused_and_counted() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_connections: Some(3),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(b.raw_ready(None).await);
    }
    for _ in 0..5 {
        match b.try_raw(None).await {
            Err(e) => assert!(refused(&e), "expected CONNECTION_REFUSED, got {e}"),
            Ok(_) => panic!("a fourth connection was admitted past max_connections 3"),
        }
    }
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_quic_refused_total{reason=max_connections}"),
        5.0
    );
    assert_eq!(m.get("starling_open_connections"), 3.0);
    // The admitted connections were not disturbed by the refusals.
    for c in &open {
        assert!(answers_ping(c).await);
    }

    // A closed connection frees its place once the broker has let it go.
    let gone = open.pop().expect("three open");
    gone.close(0u32.into(), b"done");
    let deadline = Instant::now() + SOON;
    loop {
        match b.try_raw(None).await {
            Ok(_) => break,
            Err(e) if refused(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no place freed after a close: {e}"),
        }
    }
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_burst_makes_new_addresses_prove_themselves() {
    // Threshold 0: every new address gets a QUIC Retry before its handshake is served.
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            handshake_retry_threshold: Some(0),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let raw = b.raw_ready(None).await;
    assert!(answers_ping(&raw).await);
    let c = b.client().await;
    let mut sub = c.subscribe("retry").await.expect("subscribe");
    c.publish_acked("retry", payload(3)).await.expect("publish");
    assert_eq!(index(&recv_n(&mut sub, 1).await[0].1), 3);
    let m = b.metrics().await;
    assert!(
        m.get("starling_quic_retries_total") >= 2.0,
        "each new connection was retried once"
    );
    assert_eq!(m.sum("starling_quic_refused_total"), 0.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_its_first_frame_is_closed_after_the_timeout() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            stream_first_frame_timeout_ms: Some(300),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let conn = b.raw_ready(None).await;

    // A header announcing 1 MiB, then nothing: the broker must not wait for the rest forever.
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let mut h = BytesMut::new();
    h.put_u8(FRAMING_VERSION);
    h.put_u8(0x10);
    h.put_u16(0);
    h.put_u32(1 << 20);
    h.put_slice(&[0u8; 100]);
    send.write_all(&h).await.expect("write");
    let started = Instant::now();
    match read_one(&mut recv).await {
        Some(Frame::Error(e)) => {
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{}", e.message);
            assert!(e.message.contains("300 ms"), "{}", e.message);
        }
        other => panic!("expected an Error after the first-frame timeout, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "closed after {:?}",
        started.elapsed()
    );
    let m = b.metrics().await;
    assert_eq!(m.get("starling_streams_timed_out_total"), 1.0);
    // The connection and the broker keep serving requests that arrive in time.
    assert!(answers_ping(&conn).await);
    let c = b.client().await;
    let mut sub = c.subscribe("timely").await.expect("subscribe");
    c.publish_acked("timely", payload(5))
        .await
        .expect("publish");
    assert_eq!(index(&recv_n(&mut sub, 1).await[0].1), 5);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_is_refused_while_a_bystander_keeps_its_latency() {
    const ATTEMPTS: usize = 2_000;
    const AT_ONCE: usize = 100;
    const CAP: u32 = 64;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_connections: Some(CAP),
            // The flood's connections never send `Hello`: out of the way of the pending
            // handshakes' caps and deadline (`handshake_flood.rs` tests those), so this tests
            // the connection cap alone.
            max_pending_handshakes: Some(4096),
            max_pending_handshakes_per_source: Some(4096),
            handshake_timeout_ms: Some(60_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let mut bystander = Bystander::start(&b).await;
    let rss_before = rss_bytes();

    // One client socket for the whole flood, so that what RSS measures is the broker's side.
    let ep = b.raw_endpoint(None);
    let addr = b.addr();
    let flood = {
        tokio::spawn(async move {
            let mut held = Vec::new();
            let (mut admitted, mut refusals) = (0usize, 0usize);
            for _ in 0..ATTEMPTS / AT_ONCE {
                let round: Vec<_> = (0..AT_ONCE)
                    .map(|_| {
                        let connecting = ep.connect(addr, "localhost").expect("connect");
                        tokio::spawn(connecting)
                    })
                    .collect();
                for t in round {
                    match t.await.expect("attempt task") {
                        // Admitted connections are kept open, so the cap stays reached.
                        Ok(c) => {
                            admitted += 1;
                            held.push(c);
                        }
                        Err(e) if refused(&e) => refusals += 1,
                        Err(e) => panic!("an attempt failed other than by refusal: {e}"),
                    }
                }
            }
            (admitted, refusals, held)
        })
    };

    // The bystander publishes and receives throughout; each round trip is timed.
    let i = bystander.until_finished(&flood).await;
    let worst = bystander.worst;
    let (admitted, refusals, held) = flood.await.expect("flood task");
    let rss_growth = rss_bytes().saturating_sub(rss_before);
    let m = b.metrics().await;
    // The bystander's own connections count against the cap too.
    assert!(admitted < CAP as usize, "admitted {admitted} of cap {CAP}");
    assert_eq!(admitted + refusals, ATTEMPTS);
    // At least one count per refused attempt; an attempt whose Initial packet was sent again
    // before the refusal reached it is refused (and counted) again.
    let counted = m.get("starling_quic_refused_total{reason=max_connections}");
    assert!(
        counted >= refusals as f64 && counted <= refusals as f64 * 1.05,
        "counted {counted} refusals, the clients saw {refusals}"
    );
    assert!(
        worst < Duration::from_secs(1),
        "bystander round trip reached {worst:?} during the flood"
    );
    assert!(
        rss_growth < 256 << 20,
        "RSS grew by {} MiB during the flood",
        rss_growth >> 20
    );
    eprintln!(
        "connection flood: {ATTEMPTS} attempts, {admitted} admitted, {refusals} refused, \
         bystander worst round trip {worst:?} over {i} publishes, RSS growth {} MiB",
        rss_growth >> 20
    );
    drop(held);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_flood_of_partial_max_size_frames_stays_small() {
    const CONNS: usize = 4;
    const STREAMS: usize = 64;
    const SENT: usize = 16 * 1024;
    let b = start_default().await;
    let mut bystander = Bystander::start(&b).await;
    let rss_before = rss_bytes();

    // Every stream announces a frame of the largest allowed size and sends only 16 KiB of it.
    // Memory reserved from the announced size would be 4 MiB per stream, 1 GiB in all.
    let (mut held, mut conns) = (Vec::new(), Vec::new());
    for _ in 0..CONNS {
        let conn = b.raw_ready(None).await;
        for _ in 0..STREAMS {
            let (mut send, recv) = conn.open_bi().await.expect("stream");
            let mut h = BytesMut::new();
            h.put_u8(FRAMING_VERSION);
            h.put_u8(0x10);
            h.put_u16(0);
            h.put_u32(4 << 20);
            h.put_slice(&[7u8; SENT]);
            send.write_all(&h).await.expect("write");
            held.push((send, recv));
        }
        conns.push(conn);
    }
    // Let the bytes reach the broker and its decoders.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let round_trip = bystander.round_trip().await;
    let rss_growth = rss_bytes().saturating_sub(rss_before);
    assert!(
        rss_growth < 128 << 20,
        "RSS grew by {} MiB for {} partial frames of 4 MiB",
        rss_growth >> 20,
        CONNS * STREAMS
    );
    assert!(
        round_trip < Duration::from_secs(1),
        "bystander round trip {round_trip:?}"
    );
    eprintln!(
        "stream flood: {} streams holding {} KiB of a 4 MiB frame each, RSS growth {} MiB, \
         bystander round trip {round_trip:?}",
        CONNS * STREAMS,
        SENT >> 10,
        rss_growth >> 20
    );
    drop((held, conns));
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_publish_and_cache_streams_are_closed_and_subscriptions_are_not() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            stream_idle_timeout_ms: Some(500),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("idle").await.expect("subscribe");

    // A raw publish stream: one acked publish, then silence.
    let conn = b.raw_ready(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let publish = Frame::Publish(starling_proto::Publish {
        request_id: 1,
        ack: starling_proto::AckMode::Ack,
        topic: "idle".into(),
        payload: payload(1),
        headers: Vec::new(),
    });
    starling_proto::write_frame(&mut send, &publish)
        .await
        .expect("publish");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::PublishAck(_))
    ));
    let started = Instant::now();
    match read_one(&mut recv).await {
        Some(Frame::Error(e)) => {
            assert_eq!(e.request_id, 0);
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{}", e.message);
            assert!(
                e.message.contains("stream_idle_timeout_ms"),
                "{}",
                e.message
            );
        }
        other => panic!("expected an Error after the idle timeout, got {other:?}"),
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
        "closed after {waited:?}"
    );
    // Then the stream ends.
    assert!(read_one(&mut recv).await.is_none());

    // The SDK's cache stream goes idle too; its next request opens a new stream.
    c.cache_put(bytes::Bytes::from_static(b"k"), payload(2), None)
        .await
        .expect("put");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let got = c
        .cache_get(bytes::Bytes::from_static(b"k"))
        .await
        .expect("get after the idle close");
    assert_eq!(got.as_deref().map(index), Some(2));

    // The subscription waited through all of it and still delivers; so does a new publish.
    assert_eq!(index(&recv_n(&mut sub, 1).await[0].1), 1);
    c.publish_acked("idle", payload(3))
        .await
        .expect("publish after the idle close");
    assert_eq!(index(&recv_n(&mut sub, 1).await[0].1), 3);

    let m = b.metrics().await;
    assert!(m.get("starling_streams_idle_closed_total{stream=publish}") >= 1.0);
    assert!(m.get("starling_streams_idle_closed_total{stream=cache}") >= 1.0);
    assert_eq!(m.get("starling_streams_timed_out_total"), 0.0);
    b.running.shutdown().await;
}
