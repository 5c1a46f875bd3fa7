//! The connection buffer budget over real QUIC: connections that fill their windows and frame
//! allowances with partial frames of the largest size hold no more than the budget, attempts
//! past it are refused and counted, and a bystander keeps being served.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_config::{ConfigOverrides, Profile};
use starling_proto::{FRAMING_VERSION, Frame, PROTOCOL_VERSION, write_frame};

use crate::common::*;

const MIB: u64 = 1 << 20;

fn refused(e: &quinn::ConnectionError) -> bool {
    matches!(e, quinn::ConnectionError::ConnectionClosed(c)
        if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED)
}

/// A raw connection from `ep` that completed the Starling handshake, or the reason it was not
/// admitted.
async fn try_ready(
    b: &TestBroker,
    ep: &quinn::Endpoint,
) -> Result<quinn::Connection, quinn::ConnectionError> {
    let conn = ep.connect(b.addr(), "localhost").expect("connect").await?;
    let (mut send, mut recv) = conn.open_bi().await?;
    write_frame(&mut send, &hello(PROTOCOL_VERSION, PROTOCOL_VERSION))
        .await
        .expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::HelloOk(_)) => Ok(conn),
        other => panic!("expected HelloOk, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_frames_on_many_connections_stay_within_the_buffer_budget() {
    const BUDGET: u64 = 160 * MIB;
    const ATTEMPTS: usize = 40;
    const STREAMS: usize = 16;
    const FRAME: u32 = 4 << 20;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            connection_buffer_budget_bytes: Some(BUDGET),
            stream_first_frame_timeout_ms: Some(120_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let mut bystander = Bystander::start(&b).await;
    let bystander_grant = b.metrics().await.get("starling_connection_buffer_bytes");
    let rss_before = rss_bytes();

    // Every stream announces a frame of the largest size and sends all of it but its last byte.
    // Without the budget each connection would hold 16 x 4 MiB = 64 MiB, 2.5 GiB in all.
    let body = Bytes::from(vec![7u8; FRAME as usize - 1]);
    // One endpoint for the whole flood: it outlives the connections, so their closes are sent
    // (and resent if lost) before the test waits for the grants to be released; an endpoint
    // dropped with its connection can lose the close, and the broker then waits for the idle
    // timeout.
    let ep = b.raw_endpoint(None);
    let (mut conns, mut writers, mut refusals) = (Vec::new(), Vec::new(), 0);
    for _ in 0..ATTEMPTS {
        let conn = match try_ready(&b, &ep).await {
            Ok(c) => c,
            Err(e) if refused(&e) => {
                refusals += 1;
                continue;
            }
            Err(e) => panic!("connection failed: {e}"),
        };
        for _ in 0..STREAMS {
            let (mut send, recv) = conn.open_bi().await.expect("stream");
            let mut h = BytesMut::new();
            h.put_u8(FRAMING_VERSION);
            h.put_u8(0x10);
            h.put_u16(0);
            h.put_u32(FRAME);
            let mut chunks = [h.freeze(), body.clone()];
            writers.push(tokio::spawn(async move {
                let _ = send.write_all_chunks(&mut chunks).await;
                // Never finish the frame; hold the stream open.
                std::future::pending::<()>().await;
                drop((send, recv));
            }));
        }
        conns.push(conn);
    }
    // Let every connection fill what it was granted.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let round_trip = bystander.round_trip().await;
    let rss_growth = rss_bytes().saturating_sub(rss_before);
    let m = b.metrics().await;
    let granted = m.get("starling_connection_buffer_bytes");
    let counted = m.get("starling_quic_refused_total{reason=connection_buffer_budget}");
    eprintln!(
        "buffer budget {} MiB: {} connections admitted, {refusals} refused, {} MiB granted \
         ({} MiB to the bystander), RSS growth {} MiB, bystander round trip {round_trip:?}",
        BUDGET >> 20,
        conns.len(),
        granted as u64 >> 20,
        bystander_grant as u64 >> 20,
        rss_growth >> 20
    );
    assert!(refusals > 0, "every attempt was admitted");
    assert!(!conns.is_empty(), "no attempt was admitted");
    assert_eq!(counted, f64::from(refusals));
    assert!(
        granted <= BUDGET as f64,
        "granted {granted} past the budget"
    );
    // The broker holds at most the budget; allocator and quinn bookkeeping get as much again.
    assert!(
        rss_growth < 2 * BUDGET,
        "RSS grew by {} MiB under a budget of {} MiB",
        rss_growth >> 20,
        BUDGET >> 20
    );
    assert!(
        round_trip < Duration::from_secs(2),
        "bystander round trip {round_trip:?}"
    );

    // Grants are released when their connections end.
    for w in &writers {
        w.abort();
    }
    for c in &conns {
        c.close(0u32.into(), b"done");
    }
    drop(conns);
    let _ = tokio::time::timeout(Duration::from_secs(5), ep.wait_idle()).await;
    wait_metrics(&b, "the flood's grants released", |m| {
        m.get("starling_connection_buffer_bytes") == bystander_grant
    })
    .await;
    b.running.shutdown().await;
}
