//! The in-process broker of `--embedded`: a real [`Broker`] on loopback
//! ephemeral ports, running on a runtime of its own whose threads are all
//! named [`BROKER_THREAD`], so the broker's CPU time can be told apart from
//! the load generator's (see `probe::threads_cpu_s`). `target` configures it with
//! `auth_mode: none` (the default is `required`): the bench measures the data path, and the
//! clients of an embedded run present no credentials.

use std::net::SocketAddr;

use starling_broker::Broker;
use starling_config::BrokerConfig;
use tokio::sync::oneshot;

use super::error::BenchError;

/// Name of every thread of the embedded broker's runtime (15 bytes: Linux
/// keeps at most that much of a thread name).
pub(crate) const BROKER_THREAD: &str = "starling-broker";

/// Where the started broker listens and what it presents.
struct Ready {
    quic_addr: SocketAddr,
    http_addr: SocketAddr,
    certificate_der: Vec<u8>,
}

/// A broker started by the benchmark.
pub(crate) struct EmbeddedBroker {
    /// QUIC address.
    pub(crate) quic_addr: SocketAddr,
    /// HTTP address (`/metrics`, `/config`).
    pub(crate) http_addr: SocketAddr,
    /// The self-signed leaf certificate (DER).
    pub(crate) certificate_der: Vec<u8>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EmbeddedBroker {
    /// Starts a broker with `cfg` on its own thread and runtime.
    pub(crate) async fn start(cfg: BrokerConfig) -> Result<Self, BenchError> {
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(BROKER_THREAD.into())
            .spawn(move || serve(cfg, ready_tx, stop_rx))
            .map_err(|e| BenchError::Broker(format!("cannot start its thread: {e}")))?;
        let ready = match ready_rx.await {
            Ok(Ok(ready)) => ready,
            Ok(Err(message)) => return Err(BenchError::Broker(message)),
            Err(_) => return Err(BenchError::Broker("its thread ended early".into())),
        };
        Ok(EmbeddedBroker {
            quic_addr: ready.quic_addr,
            http_addr: ready.http_addr,
            certificate_der: ready.certificate_der,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Drains and stops the broker, waiting for its thread.
    pub(crate) async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The broker thread: builds the runtime, starts the broker, reports where it
/// listens, then waits for the stop signal and drains.
fn serve(
    cfg: BrokerConfig,
    ready: oneshot::Sender<Result<Ready, String>>,
    stop: oneshot::Receiver<()>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(BROKER_THREAD)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot build its runtime: {e}")));
            return;
        }
    };
    runtime.block_on(async move {
        let started = match Broker::new(cfg) {
            Ok(broker) => broker.start().await,
            Err(e) => Err(e),
        };
        let running = match started {
            Ok(running) => running,
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                return;
            }
        };
        let info = Ready {
            quic_addr: running.quic_addr,
            http_addr: running.http_addr,
            certificate_der: running.certificate_der.clone(),
        };
        if ready.send(Ok(info)).is_ok() {
            let _ = stop.await;
        }
        running.shutdown().await;
    });
}
