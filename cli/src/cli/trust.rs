//! Turning `--ca`, `--insecure` and `--fingerprint` into a [`Trust`].

use std::path::PathBuf;

use starling_client::Trust;

use super::error::CliError;

/// The one trust option given; anything but exactly one is a usage error.
pub(crate) fn select(
    ca: Option<PathBuf>,
    insecure: bool,
    fingerprint: Option<&str>,
) -> Result<Trust, CliError> {
    let usage = || {
        CliError::Usage(
            "choose exactly one of --ca FILE, --insecure or --fingerprint HEX".to_string(),
        )
    };
    match (ca, insecure, fingerprint) {
        (Some(path), false, None) => Ok(Trust::CaFile(path)),
        (None, true, None) => Ok(Trust::Insecure),
        (None, false, Some(hex)) => Ok(Trust::fingerprint_hex(hex)?),
        _ => Err(usage()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_option_is_required() {
        assert!(matches!(select(None, true, None), Ok(Trust::Insecure)));
        assert!(matches!(
            select(Some("ca.pem".into()), false, None),
            Ok(Trust::CaFile(p)) if p.as_os_str() == "ca.pem"
        ));
        let hex = "0f".repeat(32);
        assert!(matches!(
            select(None, false, Some(&hex)),
            Ok(Trust::Fingerprint(fp)) if fp == [0x0f; 32]
        ));
        for (ca, insecure, fp) in [
            (None, false, None),
            (Some(PathBuf::from("x")), true, None),
            (None, true, Some(hex.as_str())),
        ] {
            let err = select(ca, insecure, fp).map_err(|e| e.to_string());
            assert_eq!(
                err.err().as_deref(),
                Some("choose exactly one of --ca FILE, --insecure or --fingerprint HEX")
            );
        }
        assert!(select(None, false, Some("zz")).is_err());
    }
}
