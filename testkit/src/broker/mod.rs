//! One in-process broker on loopback ephemeral ports for the SDK and CLI tests, and client
//! configs that trust it; [`secured`]: one that requires credentials.

pub mod secured;

use std::time::Duration;

use starling_broker::{Broker, RunningBroker};
use starling_client::{ClientConfig, Trust, certificate_fingerprint};
use starling_config::{AuthMode, ConfigOverrides, Profile, compose};

/// Upper bound for anything that should happen "soon" on a loaded machine.
pub const SOON: Duration = Duration::from_secs(10);

/// Starts a broker with the balanced profile on 127.0.0.1 ephemeral ports, without
/// authentication (`auth_mode: none`): these tests exercise the data path.
pub async fn start_broker() -> RunningBroker {
    start_broker_with(&ConfigOverrides::default()).await
}

/// [`start_broker`] with `extra` on top (e.g. durable topics and a storage directory).
pub async fn start_broker_with(extra: &ConfigOverrides) -> RunningBroker {
    let mut overrides = ConfigOverrides {
        auth_mode: Some(AuthMode::None),
        quic_listen: Some("127.0.0.1:0".parse().expect("addr")),
        http_listen: Some("127.0.0.1:0".parse().expect("addr")),
        drain_timeout_ms: Some(1_000),
        ..ConfigOverrides::default()
    };
    overrides.merge(extra);
    let cfg = compose(Profile::Balanced, None, &overrides);
    Broker::new(cfg)
        .expect("valid config")
        .start()
        .await
        .expect("broker starts")
}

/// A client config pinning the broker's certificate fingerprint.
pub fn pinned_config(b: &RunningBroker) -> ClientConfig {
    let fp = certificate_fingerprint(&b.certificate_der);
    ClientConfig::new(b.quic_addr.to_string(), Trust::Fingerprint(fp))
}
