//! A BrokerUser's credentials Secret as the suite reads it back ([`UserCredentials`]): its
//! files, the SDK credentials and CA in it, an SDK [`ClientConfig`] built from them, and a
//! directory of its files for `starling --credentials DIR` ([`CredentialsDirGuard`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use starling_client::{ClientConfig, Credentials, Trust};

/// A BrokerUser's credentials Secret, read back.
#[derive(Debug, Clone)]
pub struct UserCredentials {
    /// The BrokerUser's name.
    pub user: String,
    /// The Secret's name (`status.secretName`).
    pub secret_name: String,
    /// Every key of the Secret and its bytes.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The token or certificate in the Secret, as the SDK reads them.
    pub credentials: Credentials,
    /// `ca.crt`: what the brokers' server certificate is verified against.
    pub ca_pem: Vec<u8>,
    /// `address`: `<cluster>.<namespace>.svc:7400`.
    pub address: String,
}

impl UserCredentials {
    /// The host part of `address`: the TLS server name the brokers' certificate carries.
    pub fn server_name(&self) -> &str {
        self.address
            .rsplit_once(':')
            .map_or(self.address.as_str(), |(host, _)| host)
    }

    /// An SDK config for this user towards `server` (an IP:port reachable from the host),
    /// verifying the brokers against `ca.crt` by the name in `address`.
    pub fn config(&self, server: impl Into<String>) -> ClientConfig {
        ClientConfig::new(server, Trust::CaPem(self.ca_pem.clone()))
            .with_server_name(self.server_name())
            .with_credentials(self.credentials.clone())
    }

    /// Writes the Secret's keys as files into a fresh directory under the temporary
    /// directory, as a Secret volume would mount them; removed when the guard drops.
    pub fn write_dir(&self) -> std::io::Result<CredentialsDirGuard> {
        let path = std::env::temp_dir().join(format!(
            "starling-e2e-credentials-{}-{:08x}",
            self.user,
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path)?;
        let guard = CredentialsDirGuard { path };
        for (key, bytes) in &self.files {
            std::fs::write(guard.path.join(key), bytes)?;
        }
        Ok(guard)
    }
}

/// A credentials directory written by [`UserCredentials::write_dir`], removed on drop.
#[derive(Debug)]
pub struct CredentialsDirGuard {
    path: PathBuf,
}

impl CredentialsDirGuard {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CredentialsDirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
