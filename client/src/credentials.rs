//! [`Credentials`]: who the client is to the broker (nobody, a user's token, or a client
//! certificate), and [`Credentials::load_dir`], which reads them from a directory laid out like
//! the credentials Secret the operator writes for a `BrokerUser`:
//!
//! | file | meaning |
//! | --- | --- |
//! | `token` | a token user's token (exclusive with `tls.crt`/`tls.key`) |
//! | `tls.crt`, `tls.key` | a certificate user's client certificate and its PEM private key |
//! | `ca.crt` | optional: the CA that signed the brokers' server certificate |
//! | `address` | optional: the broker's `host:port` |
//!
//! Neither a token nor a private key ever appears in `Debug` output or in an error message.

use std::fmt;
use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::ClientError;
use crate::trust::Trust;

/// File holding a token user's token.
pub const TOKEN_FILE: &str = "token";
/// File holding the client certificate chain (PEM).
pub const CERT_FILE: &str = "tls.crt";
/// File holding the client certificate's private key (PEM).
pub const KEY_FILE: &str = "tls.key";
/// File holding the CA that signed the brokers' server certificate (PEM).
pub const CA_FILE: &str = "ca.crt";
/// File holding the broker's `host:port`.
pub const ADDRESS_FILE: &str = "address";

/// How the client authenticates to the broker.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    /// No identity: accepted only by a broker running with `auth_mode: none`.
    #[default]
    None,
    /// A token user: the token goes in `Hello.auth_token` with the `AUTH_TOKEN` feature bit.
    Token(String),
    /// A certificate user (or, on a broker's peer link, another broker): the client
    /// certificate is presented in the TLS handshake.
    Certificate {
        /// The certificate chain, leaf first (PEM).
        cert_pem: Vec<u8>,
        /// The leaf certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
        key_pem: Vec<u8>,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::Token(_) => f.write_str("Token(<redacted>)"),
            Credentials::Certificate { cert_pem, .. } => f
                .debug_struct("Certificate")
                .field("cert_pem", &format_args!("<{} bytes>", cert_pem.len()))
                .field("key_pem", &format_args!("<redacted>"))
                .finish(),
        }
    }
}

/// What [`Credentials::load_dir`] found in a credentials directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsDir {
    /// The token or the certificate and key.
    pub credentials: Credentials,
    /// `ca.crt` as [`Trust::CaPem`], when present.
    pub trust: Option<Trust>,
    /// The trimmed content of `address`, when present and not empty.
    pub address: Option<String>,
}

/// Why a credentials directory could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// The directory does not exist or is not a directory.
    #[error("credentials directory {path} does not exist or is not a directory")]
    NotADirectory {
        /// The directory given.
        path: PathBuf,
    },
    /// A file exists but cannot be read.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// Neither `token` nor `tls.crt` and `tls.key`.
    #[error("credentials directory {path} holds neither `token` nor `tls.crt` and `tls.key`")]
    Empty {
        /// The directory.
        path: PathBuf,
    },
    /// Both `token` and a certificate: which identity is meant is unclear.
    #[error(
        "credentials directory {path} holds both `token` and `tls.crt`/`tls.key`: keep only one identity"
    )]
    Ambiguous {
        /// The directory.
        path: PathBuf,
    },
    /// One of `tls.crt` and `tls.key` without the other.
    #[error("credentials directory {path} has `{present}` but no `{missing}`")]
    Incomplete {
        /// The directory.
        path: PathBuf,
        /// The file found.
        present: &'static str,
        /// The file missing.
        missing: &'static str,
    },
    /// A token that is empty or not UTF-8 text (its content is never shown).
    #[error("{path} does not hold a token (it is empty or not UTF-8 text)")]
    BadToken {
        /// The file.
        path: PathBuf,
    },
    /// A certificate, key or CA file that does not hold what it should.
    #[error("{what}: {reason}")]
    BadPem {
        /// The file or value.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl Credentials {
    /// A token user's credentials.
    pub fn token(token: impl Into<String>) -> Credentials {
        Credentials::Token(token.into())
    }

    /// A certificate user's credentials read from a PEM certificate chain and a PEM private key
    /// file (both checked here, so a wrong file fails now rather than at connect).
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Credentials, ClientError> {
        let cert_pem = read(cert)?;
        let key_pem = read(key)?;
        certificate_chain(&cert_pem, &cert.display().to_string())?;
        private_key(&key_pem, &key.display().to_string())?;
        Ok(Credentials::Certificate { cert_pem, key_pem })
    }

    /// Reads a credentials directory (see the module doc for its layout): exactly one identity
    /// (`token`, or `tls.crt` with `tls.key`), plus optional `ca.crt` and `address`.
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<CredentialsDir, ClientError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(CredentialsError::NotADirectory {
                path: dir.to_path_buf(),
            }
            .into());
        }
        let token = read_optional(&dir.join(TOKEN_FILE))?;
        let cert = read_optional(&dir.join(CERT_FILE))?;
        let key = read_optional(&dir.join(KEY_FILE))?;
        let credentials = match (token, cert, key) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(CredentialsError::Ambiguous {
                    path: dir.to_path_buf(),
                }
                .into());
            }
            (Some(token), None, None) => {
                let token = String::from_utf8(token)
                    .ok()
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| CredentialsError::BadToken {
                        path: dir.join(TOKEN_FILE),
                    })?;
                Credentials::Token(token)
            }
            (None, Some(cert_pem), Some(key_pem)) => {
                certificate_chain(&cert_pem, &dir.join(CERT_FILE).display().to_string())?;
                private_key(&key_pem, &dir.join(KEY_FILE).display().to_string())?;
                Credentials::Certificate { cert_pem, key_pem }
            }
            (None, Some(_), None) => return Err(incomplete(dir, CERT_FILE, KEY_FILE)),
            (None, None, Some(_)) => return Err(incomplete(dir, KEY_FILE, CERT_FILE)),
            (None, None, None) => {
                return Err(CredentialsError::Empty {
                    path: dir.to_path_buf(),
                }
                .into());
            }
        };
        let trust = match read_optional(&dir.join(CA_FILE))? {
            Some(pem) => {
                certificate_chain(&pem, &dir.join(CA_FILE).display().to_string())?;
                Some(Trust::CaPem(pem))
            }
            None => None,
        };
        let address = match read_optional(&dir.join(ADDRESS_FILE))? {
            Some(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| CredentialsError::BadPem {
                    what: dir.join(ADDRESS_FILE).display().to_string(),
                    reason: "not UTF-8 text".into(),
                })?;
                Some(text.trim().to_string()).filter(|a| !a.is_empty())
            }
            None => None,
        };
        Ok(CredentialsDir {
            credentials,
            trust,
            address,
        })
    }

    /// The identity a command line chose with its options (`--cert FILE --key FILE`,
    /// `--token TOKEN`, `--credentials DIR`): at most one of the three, else
    /// [`ClientError::Config`] says so. No option is [`Credentials::None`]. With a directory,
    /// its `ca.crt` and `address` come back too, for the caller to use when the command line
    /// did not choose a trust or a server itself.
    pub fn select(
        cert: Option<&Path>,
        key: Option<&Path>,
        token: Option<&str>,
        dir: Option<&Path>,
    ) -> Result<CredentialsDir, ClientError> {
        let only = |credentials| CredentialsDir {
            credentials,
            trust: None,
            address: None,
        };
        let chosen = usize::from(cert.is_some() || key.is_some())
            + usize::from(token.is_some())
            + usize::from(dir.is_some());
        if chosen > 1 {
            return Err(ClientError::Config(
                "choose at most one of --cert FILE --key FILE, --token TOKEN (or STARLING_TOKEN) \
                 and --credentials DIR"
                    .into(),
            ));
        }
        match (cert, key, token, dir) {
            (Some(cert), Some(key), None, None) => {
                Ok(only(Credentials::from_pem_files(cert, key)?))
            }
            (Some(_), None, ..) => Err(ClientError::Config("--cert needs --key".into())),
            (None, Some(_), ..) => Err(ClientError::Config("--key needs --cert".into())),
            (None, None, Some(token), None) => {
                let token = token.trim();
                if token.is_empty() {
                    return Err(ClientError::Config("the token is empty".into()));
                }
                Ok(only(Credentials::Token(token.to_string())))
            }
            (None, None, None, Some(dir)) => Credentials::load_dir(dir),
            _ => Ok(only(Credentials::None)),
        }
    }

    /// The token, if these are token credentials (what is sent in `Hello`).
    pub fn auth_token(&self) -> Option<&str> {
        match self {
            Credentials::Token(t) => Some(t),
            _ => None,
        }
    }
}

fn incomplete(dir: &Path, present: &'static str, missing: &'static str) -> ClientError {
    CredentialsError::Incomplete {
        path: dir.to_path_buf(),
        present,
        missing,
    }
    .into()
}

fn read(path: &Path) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|e| {
        CredentialsError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }
        .into()
    })
}

/// A file's bytes, `None` when it does not exist.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, ClientError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CredentialsError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }
        .into()),
    }
}

/// Every certificate of a PEM bundle; at least one.
pub(crate) fn certificate_chain(
    pem: &[u8],
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| bad_pem(what, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad_pem(what, "no CERTIFICATE block".into()));
    }
    Ok(certs)
}

/// The first private key of a PEM file. The key's bytes never reach an error message.
pub(crate) fn private_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, ClientError> {
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|_| bad_pem(what, "not a PEM private key".into()))?
        .ok_or_else(|| bad_pem(what, "no PRIVATE KEY block".into()))
}

fn bad_pem(what: &str, reason: String) -> ClientError {
    CredentialsError::BadPem {
        what: what.to_string(),
        reason,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;

    struct Pair {
        cert: Vec<u8>,
        key: Vec<u8>,
    }

    fn pair() -> Pair {
        let c = rcgen::generate_simple_self_signed(vec!["alice".into()]).unwrap();
        Pair {
            cert: c.cert.pem().into_bytes(),
            key: c.signing_key.serialize_pem().into_bytes(),
        }
    }

    fn dir_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        dir
    }

    fn credentials_error(r: Result<CredentialsDir, ClientError>) -> CredentialsError {
        match r {
            Err(ClientError::Credentials(e)) => e,
            other => panic!("expected a credentials error, got {other:?}"),
        }
    }

    #[test]
    fn token_layout_with_ca_and_address() {
        let p = pair();
        let dir = dir_with(&[
            ("token", b"s3cret-token\n"),
            ("ca.crt", &p.cert),
            ("address", b" demo.team-a.svc:7400\n"),
        ]);
        let loaded = Credentials::load_dir(dir.path()).unwrap();
        assert_eq!(
            loaded.credentials,
            Credentials::Token("s3cret-token".into())
        );
        assert_eq!(loaded.trust, Some(Trust::CaPem(p.cert)));
        assert_eq!(loaded.address.as_deref(), Some("demo.team-a.svc:7400"));
        let cfg = loaded.into_config().unwrap();
        assert_eq!(cfg.server, "demo.team-a.svc:7400");
        assert_eq!(cfg.credentials.auth_token(), Some("s3cret-token"));
    }

    #[test]
    fn certificate_layout_without_optional_files() {
        let p = pair();
        let dir = dir_with(&[("tls.crt", &p.cert), ("tls.key", &p.key)]);
        let loaded = Credentials::load_dir(dir.path()).unwrap();
        assert_eq!(
            loaded.credentials,
            Credentials::Certificate {
                cert_pem: p.cert,
                key_pem: p.key
            }
        );
        assert_eq!((loaded.trust.clone(), loaded.address.clone()), (None, None));
        let err = loaded.into_config().unwrap_err().to_string();
        assert!(err.contains("no `address` file"), "{err}");
    }

    #[test]
    fn missing_ambiguous_and_incomplete_directories_are_refused() {
        let p = pair();
        let missing = Credentials::load_dir("/nonexistent/creds");
        assert!(matches!(
            credentials_error(missing),
            CredentialsError::NotADirectory { .. }
        ));
        let empty = dir_with(&[("ca.crt", &p.cert)]);
        assert!(matches!(
            credentials_error(Credentials::load_dir(empty.path())),
            CredentialsError::Empty { .. }
        ));
        let both = dir_with(&[("token", b"t"), ("tls.crt", &p.cert), ("tls.key", &p.key)]);
        assert!(matches!(
            credentials_error(Credentials::load_dir(both.path())),
            CredentialsError::Ambiguous { .. }
        ));
        let key_only = dir_with(&[("tls.key", &p.key)]);
        assert_eq!(
            credentials_error(Credentials::load_dir(key_only.path())),
            CredentialsError::Incomplete {
                path: key_only.path().to_path_buf(),
                present: "tls.key",
                missing: "tls.crt"
            }
        );
        let cert_only = dir_with(&[("tls.crt", &p.cert)]);
        assert!(matches!(
            credentials_error(Credentials::load_dir(cert_only.path())),
            CredentialsError::Incomplete {
                missing: "tls.key",
                ..
            }
        ));
    }

    #[test]
    fn bad_contents_are_refused_without_echoing_secrets() {
        let p = pair();
        let blank = dir_with(&[("token", b" \n")]);
        assert!(matches!(
            credentials_error(Credentials::load_dir(blank.path())),
            CredentialsError::BadToken { .. }
        ));
        let swapped = dir_with(&[("tls.crt", &p.key), ("tls.key", &p.cert)]);
        let err = credentials_error(Credentials::load_dir(swapped.path()));
        assert!(matches!(err, CredentialsError::BadPem { .. }), "{err}");
        assert!(!err.to_string().contains("PRIVATE KEY-----"), "{err}");
        let bad_key = dir_with(&[("tls.crt", &p.cert), ("tls.key", b"hunter2")]);
        let err = credentials_error(Credentials::load_dir(bad_key.path())).to_string();
        assert!(err.contains("tls.key") && !err.contains("hunter2"), "{err}");
        let bad_ca = dir_with(&[("token", b"t"), ("ca.crt", b"nope")]);
        assert!(matches!(
            credentials_error(Credentials::load_dir(bad_ca.path())),
            CredentialsError::BadPem { .. }
        ));
    }

    #[cfg(unix)]
    #[test]
    fn an_unreadable_file_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = dir_with(&[("token", b"t")]);
        let file = dir.path().join("token");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::read(&file).is_ok() {
            return; // running as root: permissions do not stop reads
        }
        assert!(matches!(
            credentials_error(Credentials::load_dir(dir.path())),
            CredentialsError::Unreadable { path, .. } if path == file
        ));
    }

    #[test]
    fn pem_files_are_checked() {
        let p = pair();
        let dir = dir_with(&[("c.pem", &p.cert), ("k.pem", &p.key)]);
        let ok = Credentials::from_pem_files(&dir.path().join("c.pem"), &dir.path().join("k.pem"));
        assert!(matches!(ok, Ok(Credentials::Certificate { .. })));
        let swapped =
            Credentials::from_pem_files(&dir.path().join("k.pem"), &dir.path().join("c.pem"));
        assert!(matches!(swapped, Err(ClientError::Credentials(_))));
        let missing = Credentials::from_pem_files(&dir.path().join("x"), &dir.path().join("k.pem"));
        assert!(matches!(
            missing,
            Err(ClientError::Credentials(
                CredentialsError::Unreadable { .. }
            ))
        ));
    }

    #[test]
    fn command_line_options_select_one_identity() {
        let p = pair();
        let dir = dir_with(&[("tls.crt", &p.cert), ("tls.key", &p.key), ("token", b"t")]);
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let none = Credentials::select(None, None, None, None).unwrap();
        assert_eq!(none.credentials, Credentials::None);
        let token = Credentials::select(None, None, Some(" t0k "), None).unwrap();
        assert_eq!(token.credentials, Credentials::Token("t0k".into()));
        let files = Credentials::select(Some(&cert), Some(&key), None, None).unwrap();
        assert!(matches!(files.credentials, Credentials::Certificate { .. }));
        let config_error = |r: Result<CredentialsDir, ClientError>| match r {
            Err(ClientError::Config(m)) => m,
            other => panic!("expected a config error, got {other:?}"),
        };
        let both = config_error(Credentials::select(
            Some(&cert),
            Some(&key),
            Some("t"),
            None,
        ));
        assert!(both.starts_with("choose at most one of"), "{both}");
        let both = config_error(Credentials::select(None, None, Some("t"), Some(dir.path())));
        assert!(both.starts_with("choose at most one of"), "{both}");
        assert_eq!(
            config_error(Credentials::select(Some(&cert), None, None, None)),
            "--cert needs --key"
        );
        assert_eq!(
            config_error(Credentials::select(None, Some(&key), None, None)),
            "--key needs --cert"
        );
        assert_eq!(
            config_error(Credentials::select(None, None, Some(" "), None)),
            "the token is empty"
        );
        // The directory's own errors come through.
        assert!(matches!(
            Credentials::select(None, None, None, Some(dir.path())),
            Err(ClientError::Credentials(CredentialsError::Ambiguous { .. }))
        ));
    }

    #[test]
    fn debug_redacts_tokens_and_keys() {
        let p = pair();
        let token = format!("{:?}", Credentials::token("s3cret-token"));
        assert_eq!(token, "Token(<redacted>)");
        let cert = Credentials::Certificate {
            cert_pem: p.cert,
            key_pem: p.key,
        };
        let shown = format!("{cert:?}");
        assert!(
            !shown.contains("PRIVATE") && shown.contains("<redacted>"),
            "{shown}"
        );
        let cfg = ClientConfig::new("h:1", Trust::Insecure)
            .with_credentials(Credentials::token("s3cret-token"));
        let shown = format!("{cfg:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("Token(<redacted>)"),
            "{shown}"
        );
        let cfg = ClientConfig::new("h:1", Trust::Insecure).with_credentials(cert);
        assert!(!format!("{cfg:?}").contains("PRIVATE KEY"));
    }
}
