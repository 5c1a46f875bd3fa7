//! Splitting `host:port` strings, resolving them and picking the TLS server name.

use std::net::{IpAddr, SocketAddr};

use crate::ClientError;
use crate::config::DEFAULT_PORT;

/// `host` and `port` of a server address. `[v6]:port`, `v4:port`, `name:port`
/// and a bare host (default port) are accepted.
pub(crate) fn split_host_port(server: &str) -> Result<(String, u16), ClientError> {
    let bad = |why: &str| ClientError::Config(format!("bad server address `{server}`: {why}"));
    let server = server.trim();
    if server.is_empty() {
        return Err(bad("empty"));
    }
    if let Some(rest) = server.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| bad("missing `]`"))?;
        let port = match after {
            "" => DEFAULT_PORT,
            p => parse_port(p.strip_prefix(':').ok_or_else(|| bad("junk after `]`"))?)
                .ok_or_else(|| bad("bad port"))?,
        };
        return Ok((host.to_string(), port));
    }
    if server.parse::<IpAddr>().is_ok() {
        return Ok((server.to_string(), DEFAULT_PORT));
    }
    match server.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !host.contains(':') => {
            let port = parse_port(port).ok_or_else(|| bad("bad port"))?;
            Ok((host.to_string(), port))
        }
        Some(_) => Err(bad("expected host:port")),
        None => Ok((server.to_string(), DEFAULT_PORT)),
    }
}

fn parse_port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// The TLS server name: the explicit one, else the host, else `localhost` for IPs.
pub(crate) fn server_name(explicit: Option<&str>, host: &str) -> String {
    match explicit {
        Some(name) => name.to_string(),
        None if host.parse::<IpAddr>().is_ok() => "localhost".to_string(),
        None => host.to_string(),
    }
}

/// Resolves `host:port`, preferring an address of the family `want_v6` when given.
pub(crate) async fn resolve(
    host: &str,
    port: u16,
    want_v6: Option<bool>,
) -> Result<SocketAddr, ClientError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| ClientError::Connect(format!("cannot resolve `{host}`: {e}")))?
        .collect();
    let preferred = want_v6.and_then(|v6| addrs.iter().find(|a| a.is_ipv6() == v6));
    preferred
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| ClientError::Connect(format!("`{host}` resolved to no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Option<(String, u16)> {
        split_host_port(s).ok()
    }

    #[test]
    fn splits_the_usual_forms() {
        assert_eq!(split("127.0.0.1:7401"), Some(("127.0.0.1".into(), 7401)));
        assert_eq!(split("broker.ns.svc:9"), Some(("broker.ns.svc".into(), 9)));
        assert_eq!(split("[::1]:7400"), Some(("::1".into(), 7400)));
        assert_eq!(split("[::1]"), Some(("::1".into(), DEFAULT_PORT)));
        assert_eq!(split("::1"), Some(("::1".into(), DEFAULT_PORT)));
        assert_eq!(split("broker"), Some(("broker".into(), DEFAULT_PORT)));
    }

    #[test]
    fn rejects_bad_addresses() {
        for bad in [
            "",
            "host:",
            "host:0",
            "host:99999",
            "[::1",
            "[::1]x",
            ":80",
            "a:b:c",
        ] {
            assert!(split(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn server_name_defaults() {
        assert_eq!(server_name(None, "broker.svc"), "broker.svc");
        assert_eq!(server_name(None, "10.0.0.1"), "localhost");
        assert_eq!(server_name(None, "::1"), "localhost");
        assert_eq!(server_name(Some("x.example"), "10.0.0.1"), "x.example");
    }

    #[tokio::test]
    async fn resolves_literal_addresses() {
        let a = resolve("127.0.0.1", 7400, None).await.ok();
        assert_eq!(a, Some(SocketAddr::from(([127, 0, 0, 1], 7400))));
    }
}
