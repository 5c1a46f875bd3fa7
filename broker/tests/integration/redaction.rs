//! No secret in any `Debug` output (issue 33, item 9), on the broker's side: the config and
//! identity types that carry a credential are formatted with one in them, and the token's (or
//! key's) text must not appear; a refused token is not echoed in the `Error` the client gets.
//! Every frame is formatted in `proto/tests/redaction.rs`.

use bytes::Bytes;
use starling_access::{Users, token_hash_hex};
use starling_client::{ClientConfig, Credentials, Trust};
use starling_config::{AuthMode, ConfigOverrides, Profile, compose};
use starling_proto::{Frame, Hello, PROTOCOL_VERSION, features, write_frame};

use crate::common::{read_one, start};

const TOKEN: &str = "s3cret-token-7f6e5d4c3b2a";
const KEY: &str = "-----BEGIN PRIVATE KEY-----MIIEvQIBADANBgkqhkiG9w0B";

fn assert_redacted(what: &str, formatted: &str) {
    assert!(
        !formatted.contains(TOKEN),
        "{what} shows the token: {formatted}"
    );
    assert!(
        !formatted.contains(KEY),
        "{what} shows the key: {formatted}"
    );
}

#[test]
fn config_and_identity_types_never_format_a_credential() {
    let token = ClientConfig::new("127.0.0.1:7400", Trust::Insecure)
        .with_credentials(Credentials::Token(TOKEN.into()));
    assert_redacted("ClientConfig (token)", &format!("{token:?} {token:#?}"));
    let cert = Credentials::Certificate {
        cert_pem: b"-----BEGIN CERTIFICATE-----".to_vec(),
        key_pem: KEY.as_bytes().to_vec(),
    };
    assert_redacted("Credentials (certificate)", &format!("{cert:?} {cert:#?}"));
    let users = Users::parse(&format!(
        "version: 1\nusers:\n  - {{name: app, authentication: {{type: token, sha256: \"{}\"}}}}\n",
        token_hash_hex(TOKEN.as_bytes())
    ))
    .unwrap();
    assert_redacted("Users", &format!("{users:?} {users:#?}"));
    let hello = Frame::Hello(Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: features::AUTH_TOKEN,
        client_name: "redaction".into(),
        auth_token: Some(Bytes::from_static(TOKEN.as_bytes())),
    });
    assert_redacted("Hello", &format!("{hello:?} {hello:#?}"));
    // The broker's config names files, never their content.
    let cfg = compose(Profile::Balanced, None, &ConfigOverrides::default());
    assert_redacted("BrokerConfig", &format!("{cfg:?}"));
}

#[tokio::test]
async fn a_refused_token_is_not_echoed() {
    let dir = std::env::temp_dir().join(format!("starling-redaction-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let users = dir.join("users.yaml");
    std::fs::write(&users, "version: 1\nusers: []\n").unwrap();
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            auth_mode: Some(AuthMode::Required),
            auth_users_file: Some(Some(users)),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let conn = b.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let hello = Frame::Hello(Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: features::AUTH_TOKEN,
        client_name: "redaction".into(),
        auth_token: Some(Bytes::from_static(TOKEN.as_bytes())),
    });
    write_frame(&mut send, &hello).await.expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::Error(e)) => assert_redacted("the Unauthorized error", &e.message),
        other => panic!("expected Unauthorized, got {other:?}"),
    }
    let closed = conn.closed().await;
    assert_redacted("the close reason", &format!("{closed:?} {closed}"));
    b.running.shutdown().await;
}
