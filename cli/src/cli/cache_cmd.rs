//! `starling cache put|get|del`.

use std::io::Write;

use starling_client::Client;

use super::args::CacheCommand;
use super::error::{CliError, Outcome};

/// Runs one cache operation, printing its result.
pub(crate) async fn run(client: &Client, cmd: CacheCommand) -> Result<Outcome, CliError> {
    match cmd {
        CacheCommand::Put { key, value, ttl } => {
            client.cache_put(key, value, ttl).await?;
            Ok(Outcome::Done)
        }
        CacheCommand::Get { key } => match client.cache_get(key).await? {
            Some(value) => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", String::from_utf8_lossy(&value))?;
                out.flush()?;
                Ok(Outcome::Done)
            }
            None => Ok(Outcome::NotFound),
        },
        CacheCommand::Del { key } => {
            let existed = client.cache_delete(key).await?;
            println!("{}", if existed { "deleted" } else { "not found" });
            Ok(Outcome::Done)
        }
    }
}
