//! The `starling-broker` command line and how it turns flags, the config file and `STARLING_*`
//! variables into the effective config.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use starling_config::{BrokerConfig, ConfigError, ConfigFile, Layer, Profile, Sources, Tier};

/// `STARLING_*` variables that are not knobs: the config path, and the CLI's server address
/// (so a shell set up for `starling` can also run the broker).
pub const NON_KNOB_ENV: &[&str] = &["STARLING_CONFIG", "STARLING_SERVER"];

/// Starling broker: QUIC pub/sub and cache.
#[derive(Debug, Parser)]
#[command(
    name = "starling-broker",
    version,
    about,
    after_help = "Clients must authenticate by default (auth_mode: required): give the broker a users document with auth_users_file (STARLING_AUTH_USERS_FILE), or run it open for development with auth_mode: none (STARLING_AUTH_MODE=none)."
)]
pub struct Args {
    /// Config file (YAML). Without one the broker runs on the embedded profile defaults.
    #[arg(long, short = 'c', env = "STARLING_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Performance profile: balanced, latency or throughput (beats the file and STARLING_PROFILE).
    #[arg(long, global = true)]
    pub profile: Option<Profile>,
    /// Deployment tier whose sizing to apply: small, medium or large.
    #[arg(long, global = true)]
    pub tier: Option<Tier>,
    /// What to do (default: run).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand, PartialEq, Eq)]
pub enum Command {
    /// Run the broker (the default).
    Run,
    /// Print the effective config as YAML and exit.
    PrintConfig,
}

impl Args {
    /// Resolves the effective config from the file, the environment and the flags.
    pub fn effective_config<I>(&self, env: I) -> Result<BrokerConfig, ConfigError>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let file = match &self.config {
            Some(path) => Layer::from(ConfigFile::load(path)?),
            None => Layer::default(),
        };
        let env = Layer::from_env(env, NON_KNOB_ENV)?;
        let flags = Layer {
            profile: self.profile,
            tier: self.tier,
            ..Layer::default()
        };
        Sources { file, env, flags }.resolve()
    }

    /// Warnings for the deprecated settings the file and the environment use (the broker logs
    /// them once logging is set up).
    pub fn deprecations<I>(&self, env: I) -> Vec<String>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut out = self
            .config
            .as_ref()
            .and_then(|p| ConfigFile::load(p).ok())
            .map(|f| f.deprecations())
            .unwrap_or_default();
        if env.into_iter().any(|(k, _)| k == "STARLING_ACK_ON_COMMIT") {
            out.push("STARLING_ACK_ON_COMMIT is deprecated: use STARLING_ACK_LEVEL".to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(argv: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("starling-broker").chain(argv.iter().copied()))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn no_arguments_run_the_embedded_balanced_default() {
        let a = args(&[]);
        assert_eq!(a.command, None);
        let cfg = a
            .effective_config(Vec::new())
            .expect("default config is valid");
        assert_eq!(cfg, Profile::Balanced.config());
    }

    #[test]
    fn flags_env_and_file_compose() {
        let dir = std::env::temp_dir().join(format!("starling-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let file = dir.join("broker.yaml");
        std::fs::write(&file, "profile: throughput\nfanout_batch_size: 5\n").expect("write");
        let a = args(&[
            "--config",
            file.to_str().unwrap_or_default(),
            "--profile",
            "latency",
            "print-config",
        ]);
        assert_eq!(a.command, Some(Command::PrintConfig));
        let env = vec![("STARLING_FANOUT_BATCH_SIZE".to_string(), "6".to_string())];
        let cfg = a.effective_config(env).expect("valid");
        assert_eq!(cfg.profile, Profile::Latency);
        assert_eq!(cfg.fanout_batch_size, 6);
        assert_eq!(cfg.event_batch_max_delay_us, 100);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn bad_profile_flag_is_rejected_by_clap() {
        let err = Args::try_parse_from(["starling-broker", "--profile", "fastest"]).err();
        assert!(
            err.map(|e| e.to_string())
                .unwrap_or_default()
                .contains("fastest")
        );
    }
}
