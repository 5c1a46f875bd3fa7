//! [`Trust`]: how the client decides whether to trust the server's certificate, and the choice
//! a command line makes with `--ca`, `--insecure` and `--fingerprint`.

use std::path::PathBuf;

/// How the client decides whether to trust the server's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Accept any certificate. For development only: a warning is logged on connect.
    Insecure,
    /// Trust the CA certificates in this PEM file.
    CaFile(PathBuf),
    /// Trust the CA certificates in this PEM text.
    CaPem(Vec<u8>),
    /// Accept only a server whose leaf certificate's DER encoding has this SHA-256.
    Fingerprint([u8; 32]),
}

impl Trust {
    /// Parses a SHA-256 fingerprint given as 64 hex digits, optionally separated
    /// by `:` (as in `AB:CD:…`), into [`Trust::Fingerprint`].
    pub fn fingerprint_hex(text: &str) -> Result<Trust, crate::ClientError> {
        crate::fingerprint::parse_hex(text).map(Trust::Fingerprint)
    }

    /// The trust a command line chose with its three options (`--ca FILE`, `--insecure`,
    /// `--fingerprint HEX`): exactly one must be given, else [`ClientError::Config`] says so.
    ///
    /// [`ClientError::Config`]: crate::ClientError::Config
    pub fn select(
        ca: Option<PathBuf>,
        insecure: bool,
        fingerprint: Option<&str>,
    ) -> Result<Trust, crate::ClientError> {
        Trust::select_or(ca, insecure, fingerprint, None)
    }

    /// [`Trust::select`], except that no option at all falls back to `fallback` when there is
    /// one (the `ca.crt` of a credentials directory, see [`crate::CredentialsDir`]).
    pub fn select_or(
        ca: Option<PathBuf>,
        insecure: bool,
        fingerprint: Option<&str>,
        fallback: Option<Trust>,
    ) -> Result<Trust, crate::ClientError> {
        match (ca, insecure, fingerprint, fallback) {
            (Some(path), false, None, _) => Ok(Trust::CaFile(path)),
            (None, true, None, _) => Ok(Trust::Insecure),
            (None, false, Some(hex), _) => Trust::fingerprint_hex(hex),
            (None, false, None, Some(trust)) => Ok(trust),
            _ => Err(crate::ClientError::Config(
                "choose exactly one of --ca FILE, --insecure or --fingerprint HEX \
                 (or --credentials DIR holding a ca.crt)"
                    .to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_takes_exactly_one_trust_option() {
        assert!(matches!(
            Trust::select(None, true, None),
            Ok(Trust::Insecure)
        ));
        assert!(matches!(
            Trust::select(Some("ca.pem".into()), false, None),
            Ok(Trust::CaFile(p)) if p.as_os_str() == "ca.pem"
        ));
        let hex = "0f".repeat(32);
        assert!(matches!(
            Trust::select(None, false, Some(&hex)),
            Ok(Trust::Fingerprint(fp)) if fp == [0x0f; 32]
        ));
        for (ca, insecure, fp) in [
            (None, false, None),
            (Some(PathBuf::from("x")), true, None),
            (None, true, Some(hex.as_str())),
        ] {
            let err = Trust::select(ca, insecure, fp).map_err(|e| e.to_string());
            assert_eq!(
                err.err().as_deref(),
                Some(
                    "invalid configuration: choose exactly one of --ca FILE, --insecure or \
                     --fingerprint HEX (or --credentials DIR holding a ca.crt)"
                )
            );
        }
        assert!(Trust::select(None, false, Some("zz")).is_err());
        // A credentials directory's CA is the trust only when no option chose one.
        let dir_ca = Some(Trust::CaPem(b"ca".to_vec()));
        assert_eq!(
            Trust::select_or(None, false, None, dir_ca.clone()).ok(),
            dir_ca
        );
        assert!(matches!(
            Trust::select_or(None, true, None, dir_ca.clone()),
            Ok(Trust::Insecure)
        ));
        assert!(Trust::select_or(Some("x".into()), true, None, dir_ca).is_err());
    }
}
