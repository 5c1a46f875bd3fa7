//! Revocation that matches the credential (issue 33, item 6): replacing a user's token in the
//! users document closes the connections opened with the old token (code 2, "credential
//! replaced"), while the user's new token, and other users' connections, keep working.

use bytes::Bytes;
use starling_access::token_hash_hex;
use starling_config::{AuthMode, ConfigOverrides, Profile};
use starling_proto::{ErrorCode, Frame, Hello, PROTOCOL_VERSION, Ping, features, write_frame};

use crate::common::{SOON, TestBroker, read_one, start};
use starling_testkit::pki::write_atomic;

const OLD: &str = "old-token-0123456789abcdef";
const NEW: &str = "new-token-fedcba9876543210";
const OTHER: &str = "other-token-5555555555555";

fn users_doc(app_token: &str) -> String {
    format!(
        "version: 1\nusers:\n  - name: app\n    authentication: {{type: token, sha256: \"{}\"}}\n  - name: other\n    authentication: {{type: token, sha256: \"{}\"}}\n",
        token_hash_hex(app_token.as_bytes()),
        token_hash_hex(OTHER.as_bytes()),
    )
}

/// A raw connection with `token`: the connection once `HelloOk` came, or the `Error` code.
async fn connect(b: &TestBroker, token: &str) -> Result<quinn::Connection, ErrorCode> {
    let conn = b.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let hello = Frame::Hello(Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: features::AUTH_TOKEN,
        client_name: "rotation".into(),
        auth_token: Some(Bytes::copy_from_slice(token.as_bytes())),
    });
    write_frame(&mut send, &hello).await.expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::HelloOk(_)) => Ok(conn),
        Some(Frame::Error(e)) => Err(e.code),
        other => panic!("expected HelloOk or Error, got {other:?}"),
    }
}

async fn answers_ping(conn: &quinn::Connection) -> bool {
    let Ok((mut send, mut recv)) = conn.open_bi().await else {
        return false;
    };
    if write_frame(&mut send, &Frame::Ping(Ping { nonce: 9 }))
        .await
        .is_err()
    {
        return false;
    }
    matches!(read_one(&mut recv).await, Some(Frame::Pong(p)) if p.nonce == 9)
}

#[tokio::test]
async fn a_replaced_token_closes_the_connections_opened_with_the_old_one() {
    let dir = std::env::temp_dir().join(format!("starling-rotation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let users = dir.join("users.yaml");
    write_atomic(&users, &users_doc(OLD));
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            auth_mode: Some(AuthMode::Required),
            auth_users_file: Some(Some(users.clone())),
            auth_reload_interval_ms: Some(200),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let old = connect(&b, OLD).await.expect("the old token is accepted");
    let other = connect(&b, OTHER)
        .await
        .expect("another user's token is accepted");
    assert!(answers_ping(&old).await);

    // The same user, a new token.
    write_atomic(&users, &users_doc(NEW));
    let closed = tokio::time::timeout(SOON, old.closed()).await;
    match closed {
        Ok(quinn::ConnectionError::ApplicationClosed(c)) => {
            assert_eq!(u64::from(c.error_code), 2, "{c:?}");
            assert_eq!(&c.reason[..], b"credential replaced");
        }
        other => panic!("the old token's connection was not closed: {other:?}"),
    }
    // The new token gets in, the old one no longer does, and the other user was not disturbed.
    let new = connect(&b, NEW).await.expect("the new token is accepted");
    assert!(answers_ping(&new).await);
    assert_eq!(connect(&b, OLD).await.err(), Some(ErrorCode::Unauthorized));
    assert!(answers_ping(&other).await);
    let m = b.metrics().await;
    assert_eq!(m.get("starling_auth_revoked_connections_total"), 1.0);
    b.running.shutdown().await;
}
