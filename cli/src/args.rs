//! Command-line arguments of `starling` (clap derive).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{Args, Parser, Subcommand};
use starling_client::{Credentials, Profile};

use super::duration::parse_duration;
use super::time_arg::parse_time;

/// `--token`, held as [`Credentials::Token`] so that no `Debug` of the arguments shows it.
fn parse_token(text: &str) -> Result<Credentials, String> {
    Ok(Credentials::Token(text.to_string()))
}

/// Exit codes, shown at the end of `starling --help`.
pub(crate) const EXIT_CODES: &str = "\
Credentials (at most one): --cert FILE --key FILE, --token TOKEN (or STARLING_TOKEN), or
--credentials DIR (a mounted BrokerUser Secret: token, or tls.crt and tls.key; its ca.crt is
the trust and its address the server unless --ca/--insecure/--fingerprint or --server say
otherwise). Without any, the broker must run with auth_mode: none.

Exit codes:
  0  success
  1  `cache get`: the key is absent
  2  any other error (usage, connection, TLS, server)
  3  unauthorized: the broker refused the credentials (none, unknown or revoked)
  4  forbidden: the user's permissions do not allow the operation on that topic or key
  5  `req`: no responders (nothing subscribes to the topic)";

/// Publish, subscribe and use the cache of a Starling broker.
#[derive(Debug, Parser)]
#[command(name = "starling", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// Broker address (host:port) [default: the `address` of --credentials DIR, else
    /// 127.0.0.1:7400].
    #[arg(long, env = "STARLING_SERVER", global = true)]
    pub(crate) server: Option<String>,
    /// Authenticate with this client certificate (PEM; needs --key).
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) cert: Option<PathBuf>,
    /// The private key of --cert (PEM).
    #[arg(long = "key", id = "key_file", value_name = "FILE", global = true)]
    pub(crate) key_file: Option<PathBuf>,
    /// Authenticate as a token user with this token.
    #[arg(
        long,
        env = "STARLING_TOKEN",
        value_name = "TOKEN",
        value_parser = parse_token,
        hide_env_values = true,
        global = true
    )]
    pub(crate) token: Option<Credentials>,
    /// Read the credentials from a directory laid out like a BrokerUser's Secret (`token`, or
    /// `tls.crt` and `tls.key`; optional `ca.crt` and `address`).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) credentials: Option<PathBuf>,
    /// Trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) ca: Option<PathBuf>,
    /// Do not verify the server certificate (development only).
    #[arg(long, global = true)]
    pub(crate) insecure: bool,
    /// Accept only a server certificate with this SHA-256 fingerprint (hex).
    #[arg(long, value_name = "HEX", global = true)]
    pub(crate) fingerprint: Option<String>,
    /// Performance profile: balanced, latency or throughput.
    #[arg(long, default_value = "balanced", global = true)]
    pub(crate) profile: Profile,
    /// TLS server name (default: the host of --server, or localhost for IPs).
    #[arg(long, value_name = "NAME", global = true)]
    pub(crate) server_name: Option<String>,
    /// Send every request to --server, which forwards what another cluster member owns
    /// (default: ask the cluster for its members and go straight to each owner).
    #[arg(long, global = true)]
    pub(crate) direct: bool,
    /// Connect and request timeout, e.g. 10s or 500ms.
    #[arg(long, value_parser = parse_duration, default_value = "10s", global = true)]
    pub(crate) timeout: Duration,
    /// Output format of `sub`, `cache get` and `bench`: text, or json (one JSON object per line:
    /// an event, a cache answer, a bench result).
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub(crate) output: Output,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    /// Human-readable text (payloads and values as lines, bench tables).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Publish a message (MSG `-` publishes each line of stdin).
    Pub(PubArgs),
    /// Print each message of a topic as a line.
    Sub(SubArgs),
    /// Join a durable consumer of a durable topic and print (and ack) each message it
    /// delivers to this member.
    Consume(ConsumeArgs),
    /// Send a request and print its reply (exit 5 when nothing subscribes to TOPIC).
    Req(ReqArgs),
    /// Check the broker end to end: subscribe to TOPIC, publish messages to it (acked) and
    /// receive each of them back, then print one `ok` line (the chart's `helm test` runs it).
    Check(CheckArgs),
    /// Answer every request on a topic or pattern with MSG, until interrupted.
    Reply(ReplyArgs),
    /// Cache operations.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Benchmarks: pub/sub and cache workloads, the raw QUIC limit, each profile against the
    /// reference (`starling bench profiles`), reports (runs the `starling-bench` harness;
    /// `starling bench --help` lists its options).
    #[command(disable_help_flag = true)]
    Bench {
        /// The harness's options and subcommand.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
    /// Print a completion script for SHELL to stdout, e.g.
    /// `starling completions bash > /etc/bash_completion.d/starling`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `starling pub`.
#[derive(Debug, Args)]
pub(crate) struct PubArgs {
    /// Topic to publish to.
    pub(crate) topic: String,
    /// The message, or `-` to publish each line of stdin.
    #[arg(value_name = "MSG")]
    pub(crate) message: String,
    /// Wait for the broker to acknowledge each message.
    #[arg(long)]
    pub(crate) ack: bool,
    /// Publish each message this many times.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) count: u64,
    /// Add a header to each message (repeatable; split at the first `=`, so the value may hold
    /// `=`). Needs a broker that grants HEADERS.
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE", value_parser = parse_header)]
    pub(crate) headers: Vec<starling_client::Header>,
    /// Give each message this message id (the `Starling-Msg-Id` header): the topic drops a
    /// repeat of an id it saw within its de-duplication window (`dedup_window_ms`) and acks
    /// it like the original, so running the same command again after a lost ack delivers the
    /// message once. Every message of this run gets the same id (with `--count` or stdin,
    /// only the first is delivered). Needs a broker granting `DEDUP`.
    #[arg(long = "msg-id", value_name = "ID")]
    pub(crate) msg_id: Option<String>,
}

/// `KEY=VALUE` as a header; the name must be a valid header name.
fn parse_header(text: &str) -> Result<starling_client::Header, String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))?;
    starling_proto::validate_header_name(name).map_err(|why| format!("{name:?}: {why}"))?;
    Ok(starling_client::Header::new(name, value))
}

/// `starling req`.
#[derive(Debug, Args)]
pub(crate) struct ReqArgs {
    /// Topic to send the request to.
    pub(crate) topic: String,
    /// The request's payload. The global `--timeout D` is how long to wait for the reply (a
    /// timeout is exit 2).
    #[arg(value_name = "MSG")]
    pub(crate) message: String,
}

/// `starling check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Topic to publish to and subscribe to (the user needs both permissions on it).
    pub(crate) topic: String,
    /// Publish and receive this many messages.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(crate) count: u64,
    /// Run the check again after a failed attempt (a broker still starting, a user the brokers
    /// have not read yet, credentials not mounted yet) until this long has passed since the
    /// start, e.g. 3m; a forbidden topic is never retried. Default 0s: one attempt. Each
    /// attempt is bounded by the global `--timeout` per step (connect, subscribe, each
    /// publish, the wait for the messages).
    #[arg(long, value_parser = parse_duration, default_value = "0s", value_name = "DURATION")]
    pub(crate) retry_for: Duration,
}

/// `starling reply`.
#[derive(Debug, Args)]
pub(crate) struct ReplyArgs {
    /// Topic (or pattern, as for `sub`) whose requests to answer.
    #[arg(value_name = "TOPIC_OR_PATTERN")]
    pub(crate) topic: String,
    /// The reply sent to every request.
    #[arg(value_name = "MSG")]
    pub(crate) message: String,
    /// Exit after answering this many requests.
    #[arg(long, value_name = "N")]
    pub(crate) count: Option<u64>,
}

/// `starling sub`.
#[derive(Debug, Args)]
pub(crate) struct SubArgs {
    /// Topic to subscribe to, or a pattern of topics: `*` matches one `.`-separated token,
    /// `>` (last) one or more, e.g. 'orders.*' or 'orders.>' (quote it for the shell). A
    /// pattern gets live messages of every matching topic, existing or new; `--output json`
    /// shows each message's topic. Not with --from-time. In a cluster, from every member.
    #[arg(value_name = "TOPIC_OR_PATTERN")]
    pub(crate) topic: String,
    /// Exit after this many messages.
    #[arg(long, value_name = "N")]
    pub(crate) count: Option<u64>,
    /// Start at the first message stamped at or after TIME, then go on live. TIME is RFC 3339
    /// (2026-01-01T12:00:00Z, 2026-01-01T13:00:00.5+01:00) or Unix milliseconds
    /// (1767268800000); times are the topic owner's clock (when a batch was written to a
    /// durable topic's log, else when it was delivered). A durable topic reaches back as far
    /// as its log; any other topic only as far as what the broker retains (replay_window_ms,
    /// 30 s by default): an older TIME starts at the oldest message retained. A TIME after
    /// the newest message (in the future too) means live messages only. Needs a broker that
    /// supports it (SUBSCRIBE_FROM_TIME).
    #[arg(long, value_name = "TIME", value_parser = parse_time, conflicts_with = "group")]
    pub(crate) from_time: Option<SystemTime>,
    /// Join queue group NAME of the topic or pattern: each message goes to one member of the
    /// group (run several `starling sub --group NAME` to share the work), while plain
    /// subscribers still get every message. NAME is 1 to 64 of A-Z a-z 0-9 - _ . Live only;
    /// needs a broker that supports it (QUEUE_GROUPS). In a cluster the members may connect
    /// to any broker: the topic's owner shares the messages among all of them.
    #[arg(long, value_name = "NAME")]
    pub(crate) group: Option<String>,
}

/// `starling consume`.
#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    /// The durable topic.
    pub(crate) topic: String,
    /// The consumer's name (1 to 64 of A-Z a-z 0-9 - _ .). Every `starling consume` with the
    /// same TOPIC and NAME is one member of the same consumer: they share its messages, each
    /// message to one of them. The consumer, its ack floor and its pending messages live on
    /// the broker, beside the topic's log, and survive restarts of either side.
    #[arg(long = "consumer", visible_alias = "name", value_name = "NAME")]
    pub(crate) name: String,
    /// Exit after this many messages (each acked first).
    #[arg(long, value_name = "N")]
    pub(crate) count: Option<u64>,
    /// Redeliver a message unacked this long after its delivery (default 30s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub(crate) ack_wait: Option<Duration>,
    /// Most deliveries of one message (default 0: no limit); past it the message goes to
    /// --dead-letter, if given, and is not delivered again.
    #[arg(long, value_name = "N")]
    pub(crate) max_deliver: Option<u32>,
    /// Most messages held unacked from the consumer's ack floor on (default 1000; at most
    /// the broker's max_consumer_ack_pending).
    #[arg(long, value_name = "N")]
    pub(crate) max_ack_pending: Option<u32>,
    /// Redelivery delays after the 1st, 2nd, … failed delivery, the last repeating, e.g.
    /// 1s,5s,30s (default: at once). At most 16.
    #[arg(long, value_parser = parse_duration, value_delimiter = ',', value_name = "DURATION,…")]
    pub(crate) backoff: Vec<Duration>,
    /// Publish messages past --max-deliver to this topic.
    #[arg(long, value_name = "TOPIC")]
    pub(crate) dead_letter: Option<String>,
    /// Where a new consumer starts: `first` (the oldest message the log holds, the default),
    /// `last` (its newest message), a position `STREAM:SEQ` (from a JSON line's position), or
    /// a TIME as for `sub --from-time`. Ignored when the consumer exists: it resumes at its
    /// ack floor.
    #[arg(long, value_parser = parse_start, default_value = "first", value_name = "WHERE")]
    pub(crate) start: StartArg,
    /// Refuse (nak) each message after printing it instead of acking it: it is redelivered
    /// after the backoff schedule, and dead-lettered past --max-deliver.
    #[arg(long)]
    pub(crate) nak: bool,
}

/// Where a new consumer starts (`consume --start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartArg {
    /// The oldest message.
    First,
    /// The newest message.
    Last,
    /// A position: stream and sequence number.
    Position(u64, u64),
    /// The first message stamped at or after this time.
    Time(SystemTime),
}

/// `first`, `last`, `STREAM:SEQ` or a time argument.
fn parse_start(text: &str) -> Result<StartArg, String> {
    match text {
        "first" => return Ok(StartArg::First),
        "last" => return Ok(StartArg::Last),
        _ => {}
    }
    if let Some((stream, seq)) = text.split_once(':')
        && !stream.is_empty()
        && stream.bytes().all(|b| b.is_ascii_digit())
    {
        let parse = |t: &str, what: &str| {
            t.parse::<u64>()
                .map_err(|_| format!("`{text}`: {what} `{t}` is not a number"))
        };
        let stream = parse(stream, "stream")?;
        if stream == 0 {
            return Err(format!("`{text}`: stream 0 is not a position"));
        }
        return Ok(StartArg::Position(stream, parse(seq, "sequence number")?));
    }
    parse_time(text)
        .map(StartArg::Time)
        .map_err(|why| format!("{why}; or first, last or STREAM:SEQ"))
}

/// `starling cache …`.
#[derive(Debug, Subcommand)]
pub(crate) enum CacheCommand {
    /// Store a value.
    Put {
        /// Key.
        key: String,
        /// Value.
        value: String,
        /// Expire after this long, e.g. 30s or 500ms.
        #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
        ttl: Option<Duration>,
    },
    /// Print a value (exit code 1 when absent).
    Get {
        /// Key.
        key: String,
    },
    /// Delete a value.
    Del {
        /// Key.
        key: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("starling").chain(args.iter().copied()))
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_pub_with_stdin_and_flags() {
        let cli = parse(&["--insecure", "pub", "t", "-", "--ack", "--count", "3"]);
        let Ok(Cli {
            command: Command::Pub(p),
            insecure: true,
            ..
        }) = cli
        else {
            panic!("unexpected parse: {cli:?}");
        };
        assert_eq!(
            (p.topic.as_str(), p.message.as_str(), p.ack, p.count),
            ("t", "-", true, 3)
        );
        assert!(p.headers.is_empty());
    }

    #[test]
    fn parses_repeated_headers_split_at_the_first_equals() {
        let cli = parse(&["pub", "t", "m", "-H", "trace=a=b", "--header", "empty="]);
        let Ok(Cli {
            command: Command::Pub(p),
            ..
        }) = cli
        else {
            panic!("unexpected parse: {cli:?}");
        };
        assert_eq!(
            p.headers,
            [
                starling_client::Header::new("trace", "a=b"),
                starling_client::Header::new("empty", "")
            ]
        );
        assert!(parse(&["pub", "t", "m", "-H", "novalue"]).is_err());
        assert!(parse(&["pub", "t", "m", "-H", "a b=c"]).is_err());
    }

    #[test]
    fn parses_cache_put_with_ttl_and_profile() {
        let cli = parse(&[
            "cache",
            "put",
            "k",
            "v",
            "--ttl",
            "500ms",
            "--profile",
            "latency",
        ]);
        let Ok(Cli {
            command: Command::Cache(CacheCommand::Put { ttl, .. }),
            profile,
            ..
        }) = cli
        else {
            panic!("unexpected parse: {cli:?}");
        };
        assert_eq!(ttl, Some(Duration::from_millis(500)));
        assert_eq!(profile, Profile::Latency);
    }

    #[test]
    fn parses_credential_options() {
        let cli = parse(&["--cert", "c.pem", "--key", "k.pem", "sub", "t"]);
        let Ok(cli) = cli else {
            panic!("unexpected parse: {cli:?}");
        };
        assert_eq!(cli.cert.as_deref(), Some(std::path::Path::new("c.pem")));
        assert_eq!(cli.key_file.as_deref(), Some(std::path::Path::new("k.pem")));
        assert_eq!(cli.server, None);
        let cli = parse(&["sub", "t", "--credentials", "/etc/creds", "--token", "x"]);
        let Ok(cli) = cli else {
            panic!("unexpected parse: {cli:?}");
        };
        assert_eq!(
            (cli.credentials.as_deref(), cli.token.as_ref()),
            (
                Some(std::path::Path::new("/etc/creds")),
                Some(&Credentials::Token("x".into()))
            )
        );
    }

    #[test]
    fn help_documents_exit_codes_and_hides_the_token() {
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains("Exit codes:") && help.contains("4  forbidden"),
            "{help}"
        );
        assert!(help.contains("STARLING_TOKEN"), "{help}");
        let cli = parse(&["--token", "s3cret", "sub", "t"]);
        assert!(!format!("{cli:?}").contains("s3cret"));
    }

    #[test]
    fn parses_sub_from_a_time_in_both_forms() {
        let from = |args: &[&str]| match parse(args) {
            Ok(Cli {
                command: Command::Sub(s),
                ..
            }) => s.from_time,
            other => panic!("unexpected parse: {other:?}"),
        };
        let want = std::time::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        assert_eq!(
            from(&["sub", "t", "--from-time", "2026-01-01T00:00:00Z"]),
            Some(want)
        );
        assert_eq!(
            from(&["sub", "t", "--from-time", "1767225600000"]),
            Some(want)
        );
        assert_eq!(from(&["sub", "t"]), None);
        assert!(parse(&["sub", "t", "--from-time", "yesterday"]).is_err());
        let help = Cli::command()
            .find_subcommand_mut("sub")
            .map(|c| c.render_long_help().to_string())
            .unwrap_or_default();
        assert!(
            help.contains("--from-time <TIME>") && help.contains("RFC 3339"),
            "{help}"
        );
    }

    #[test]
    fn parses_consume_starts() {
        let start = |w: &str| match parse(&["consume", "t", "--consumer", "n", "--start", w]) {
            Ok(Cli {
                command: Command::Consume(c),
                ..
            }) => Ok(c.start),
            Ok(other) => panic!("unexpected parse: {other:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(start("first"), Ok(StartArg::First));
        assert_eq!(start("last"), Ok(StartArg::Last));
        assert_eq!(start("7:42"), Ok(StartArg::Position(7, 42)));
        assert_eq!(
            start("2026-01-01T00:00:00Z"),
            Ok(StartArg::Time(
                std::time::UNIX_EPOCH + Duration::from_secs(1_767_225_600)
            ))
        );
        assert!(start("0:1").is_err_and(|e| e.contains("stream 0")));
        assert!(start("7:x").is_err_and(|e| e.contains("not a number")));
        assert!(start("soon").is_err_and(|e| e.contains("STREAM:SEQ")));
        let Ok(Cli {
            command: Command::Consume(c),
            ..
        }) = parse(&[
            "consume",
            "t",
            "--name",
            "n",
            "--backoff",
            "1s,5s",
            "--max-deliver",
            "3",
        ])
        else {
            panic!("consume parses");
        };
        assert_eq!(
            c.backoff,
            vec![Duration::from_secs(1), Duration::from_secs(5)]
        );
        assert_eq!(
            (c.start, c.max_deliver, c.nak),
            (StartArg::First, Some(3), false)
        );
        assert!(parse(&["consume", "t"]).is_err(), "--consumer is required");
    }

    #[test]
    fn rejects_bad_values() {
        assert!(parse(&["cache", "put", "k", "v", "--ttl", "5 parsecs"]).is_err());
        assert!(parse(&["--profile", "fast", "sub", "t"]).is_err());
        assert!(parse(&["sub"]).is_err());
    }
}
