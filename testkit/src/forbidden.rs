//! [`assert_forbidden`]: the check every access-control test makes of a refused operation.

use starling_client::ClientError;

/// Asserts that `r` is a typed [`ClientError::Forbidden`] refusal of `want_op` (`publish`,
/// `subscribe`, `cache_read`, `cache_write`) on `want_name`, whose message names both the user
/// and the topic or key.
#[track_caller]
pub fn assert_forbidden<T: std::fmt::Debug>(
    r: Result<T, ClientError>,
    want_op: &str,
    want_name: &str,
    user: &str,
) {
    match r {
        Err(ClientError::Forbidden { op, name, message }) => {
            assert_eq!(
                (op.as_str(), name.as_str()),
                (want_op, want_name),
                "{message}"
            );
            assert!(
                message.contains(user) && message.contains(want_name),
                "the refusal names the user and the object: {message}"
            );
        }
        other => panic!("{want_op} {want_name} as {user}: expected Forbidden, got {other:?}"),
    }
}
