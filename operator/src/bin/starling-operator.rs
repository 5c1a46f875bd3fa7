//! The operator process. See `starling_operator::cli` for flags.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    starling_operator::cli::run(starling_operator::cli::Args::parse())
        .await
        .map_err(|e| anyhow::anyhow!(e))
}
