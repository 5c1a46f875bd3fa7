//! Hot reload of the listener's TLS material: the server certificate and key
//! (`tls_cert_file`/`tls_key_file`) and the client CA (`auth_client_ca_file`) are read again
//! every `auth_reload_interval_ms` (a mounted Secret changes them in place; the broker's one
//! poller, [`crate::watched`]). When any of them
//! changed and the new set loads, new connections are served with it
//! (`Endpoint::set_server_config`, and the per-grant configs of `server::buffers`);
//! established connections keep theirs. A set that does not load (a renewal caught half
//! written, a broken file) is logged and counted, and the material in force stays.
//!
//! A rotation never splits the cluster: peers trust each other's server certificate by its
//! issuer (`cluster::peers`) and each other's peer certificate by the cluster CA, so members
//! holding the old and the new certificate for a moment still accept each other.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::BrokerError;
use crate::metrics::Metrics;
use crate::server::buffers::Buffers;
use crate::tls::{ClientCa, TlsMaterial};
use crate::transport;
use crate::watched::{self, Watched};

/// The files of the listener's TLS material.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server certificate and key, when read from files (not self-signed).
    pub server: Option<(PathBuf, PathBuf)>,
    /// The client CA.
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// Whether there is anything to watch.
    pub fn any(&self) -> bool {
        self.server.is_some() || self.client_ca.is_some()
    }

    /// Every file's bytes (empty for a file that cannot be read).
    fn contents(&self) -> Vec<Vec<u8>> {
        let mut paths: Vec<&PathBuf> = Vec::new();
        if let Some((cert, key)) = &self.server {
            paths.extend([cert, key]);
        }
        paths.extend(self.client_ca.iter());
        paths
            .into_iter()
            .map(|p| std::fs::read(p).unwrap_or_default())
            .collect()
    }

    /// Loads the material from `contents` (in [`TlsFiles::contents`] order): the server
    /// material (`None` when self-signed: it stays) and the client CA.
    fn load(
        &self,
        contents: &[Vec<u8>],
    ) -> Result<(Option<TlsMaterial>, Option<ClientCa>), BrokerError> {
        let mut rest = contents.iter();
        let mut next = || rest.next().map(Vec::as_slice).unwrap_or_default();
        let material = match &self.server {
            Some((cert, key)) => Some(TlsMaterial::from_pem(cert, next(), key, next())?),
            None => None,
        };
        let ca = match &self.client_ca {
            Some(path) => Some(ClientCa::from_pem(path, next())?),
            None => None,
        };
        Ok((material, ca))
    }
}

/// The listener's TLS files as the poller watches them ([`crate::watched`]): a set of contents
/// unlike the last one seen is loaded once; one that does not load is counted once, and tried
/// again only when the files change again.
struct TlsDocument {
    files: TlsFiles,
    /// The contents last seen, loaded or not.
    seen: Vec<Vec<u8>>,
    /// The material in force.
    material: TlsMaterial,
    buffers: Arc<Buffers>,
    endpoint: quinn::Endpoint,
    metrics: Arc<Metrics>,
}

impl Watched for TlsDocument {
    type Doc = Vec<Vec<u8>>;

    fn read(&self) -> impl Future<Output = Result<Vec<Vec<u8>>, String>> + Send {
        let contents = self.files.contents();
        async move { Ok(contents) }
    }

    fn apply(&mut self, now: Vec<Vec<u8>>) -> Result<(), String> {
        if now == self.seen {
            return Ok(());
        }
        self.seen = now;
        let loaded = self.files.load(&self.seen).and_then(|(new, ca)| {
            let server = new.unwrap_or_else(|| self.material.clone());
            let crypto = transport::server_crypto(&server, ca.as_ref())?;
            Ok((server, crypto))
        });
        match loaded {
            Ok((server, crypto)) => {
                let fingerprint = server.fingerprint();
                self.endpoint
                    .set_server_config(Some(self.buffers.set_crypto(crypto)));
                self.material = server;
                self.metrics
                    .tls_reloads
                    .with_label_values(&["applied"])
                    .inc();
                tracing::info!(%fingerprint, "TLS material reloaded: new connections use it");
                Ok(())
            }
            Err(e) => {
                self.metrics
                    .tls_reloads
                    .with_label_values(&["failed"])
                    .inc();
                Err(e.to_string())
            }
        }
    }

    fn failure(&self) -> String {
        "changed TLS files do not load; the material in force stays".into()
    }
}

/// Polls `files` every `every` and installs changed material for new connections until `stop`.
/// `initial` is the material the listener started with.
pub async fn run(
    files: TlsFiles,
    initial: TlsMaterial,
    buffers: Arc<Buffers>,
    endpoint: quinn::Endpoint,
    metrics: Arc<Metrics>,
    every: Duration,
    stop: watch::Receiver<bool>,
) {
    let seen = files.contents();
    let document = TlsDocument {
        files,
        seen,
        material: initial,
        buffers,
        endpoint,
        metrics,
    };
    watched::poll(document, every, stop).await;
}
