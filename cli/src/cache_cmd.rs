//! `starling cache put|get|del`.

use std::io::Write;

use starling_client::Client;

use super::args::{CacheCommand, Output};
use super::error::{CliError, Outcome};

/// Runs one cache operation, printing its result.
pub(crate) async fn run(
    client: &Client,
    cmd: CacheCommand,
    output: Output,
) -> Result<Outcome, CliError> {
    match cmd {
        CacheCommand::Put { key, value, ttl } => {
            client.cache_put(key, value, ttl).await?;
            Ok(Outcome::Done)
        }
        CacheCommand::Get { key } => {
            let value = client.cache_get(key.clone()).await?;
            let mut out = std::io::stdout().lock();
            match output {
                Output::Text => {
                    if let Some(v) = &value {
                        writeln!(out, "{}", String::from_utf8_lossy(v))?;
                    }
                }
                Output::Json => writeln!(
                    out,
                    "{}",
                    super::json::cache_value_line(&key, value.as_deref())
                )?,
            }
            out.flush()?;
            Ok(if value.is_some() {
                Outcome::Done
            } else {
                Outcome::NotFound
            })
        }
        CacheCommand::Del { key } => {
            let existed = client.cache_delete(key).await?;
            println!("{}", if existed { "deleted" } else { "not found" });
            Ok(Outcome::Done)
        }
    }
}
