//! The `starling-broker` binary: parse flags, resolve the config, run until SIGTERM/SIGINT,
//! drain, exit.

use std::process::ExitCode;

use clap::Parser;
use starling_broker::cli::{Args, Command};
use starling_broker::{Broker, telemetry};

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match args.effective_config(std::env::vars()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("starling-broker: {e}");
            return ExitCode::from(2);
        }
    };
    if args.command == Some(Command::PrintConfig) {
        print!("{}", cfg.to_yaml());
        return ExitCode::SUCCESS;
    }
    telemetry::init(cfg.log_format, &cfg.log_level);
    for warning in args.deprecations(std::env::vars()) {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("starling-broker: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("starling-broker: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cfg: starling_config::BrokerConfig) -> anyhow::Result<()> {
    let running = Broker::new(cfg)?.start().await?;
    wait_for_signal().await?;
    running.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
    Ok(())
}
