//! The QUIC path knobs (`udp_*_buffer_bytes`, `quic_initial_mtu`, `quic_congestion_controller`,
//! ACK frequency): a broker with them set serves a publish/subscribe round trip to an SDK client
//! tuned the same way, and exports the socket buffers the kernel granted.

use starling_client::Client;
use starling_config::{ConfigOverrides, CongestionController, Profile};

use crate::common::*;

/// What Linux reports for a buffer of `asked` bytes: twice the request, capped at the sysctl
/// (doubled too). `None` where the sysctl cannot be read.
fn linux_reports(asked: u64, sysctl: &str) -> Option<f64> {
    let max: u64 = std::fs::read_to_string(format!("/proc/sys/net/core/{sysctl}"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((2 * asked.min(max)) as f64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_path_knobs_set_round_trips_and_exports_its_socket_buffers() {
    let recv = 4u64 << 20;
    // Likely past `net.core.wmem_max`: the gauge shows the capped size the kernel granted.
    let send = 64u64 << 20;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            udp_recv_buffer_bytes: Some(recv),
            udp_send_buffer_bytes: Some(send),
            quic_initial_mtu: Some(1400),
            quic_congestion_controller: Some(CongestionController::NewReno),
            quic_ack_eliciting_threshold: Some(Some(4)),
            quic_max_ack_delay_us: Some(Some(5_000)),
            ..ConfigOverrides::default()
        },
    )
    .await;

    let mut cfg = b.client_config();
    let path = &mut cfg.transport.path;
    path.udp_recv_buffer_bytes = 1 << 20;
    path.initial_mtu = 1400;
    path.congestion_controller = starling_client::CongestionController::NewReno;
    path.ack_eliciting_threshold = Some(4);
    let client = Client::connect(cfg).await.expect("client connects");
    let mut sub = client.subscribe("path").await.expect("subscribe");
    // Payloads around the datagram size, so events span datagrams of the raised initial MTU.
    let payload = |i: u32| {
        let mut p = payload(i).to_vec();
        p.resize(1000 + (i as usize % 4) * 500, 0xab);
        bytes::Bytes::from(p)
    };
    for i in 0..200 {
        client
            .publish_acked("path", payload(i))
            .await
            .expect("publish");
    }
    let got = recv_n(&mut sub, 200).await;
    for (i, (_, p)) in got.iter().enumerate() {
        assert_eq!(p, &payload(i as u32), "event {i}");
    }

    let m = b.metrics().await;
    let (recv_gauge, send_gauge) = (
        m.get("starling_udp_recv_buffer_bytes"),
        m.get("starling_udp_send_buffer_bytes"),
    );
    assert!(
        recv_gauge > 0.0 && send_gauge > 0.0,
        "{recv_gauge} {send_gauge}"
    );
    if cfg!(target_os = "linux") {
        if let Some(expected) = linux_reports(recv, "rmem_max") {
            assert_eq!(recv_gauge, expected, "receive buffer as Linux reports it");
        }
        if let Some(expected) = linux_reports(send, "wmem_max") {
            assert_eq!(send_gauge, expected, "send buffer as Linux reports it");
        }
    }
    client.close().await;
    b.running.shutdown().await;
}
