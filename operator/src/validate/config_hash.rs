//! The restart hash of a cluster's rendered config: computed where the config text is
//! resolved (validation), carried in [`super::ValidatedCluster::config_hash`] and stamped on the
//! pod template by the builders.

use sha2::{Digest, Sha256};

/// The restart hash: SHA-256 over the broker config text and the TLS secret name. The replica
/// count and the member list are deliberately not inputs, so scaling never restarts brokers.
pub fn config_hash(config_yaml: &str, tls_secret: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(b"config\0");
    h.update(config_yaml.as_bytes());
    h.update(b"\0tls\0");
    h.update(tls_secret.unwrap_or("").as_bytes());
    let digest = h.finalize();
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}
