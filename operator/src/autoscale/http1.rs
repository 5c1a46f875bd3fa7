//! The HTTP/1.0 answers both signal sources read (a broker's `/metrics`, Prometheus's query
//! API): the split of a raw answer into its status code, head and body. Pure.

/// A raw answer split at the blank line: the status code (0 when the status line is not
/// readable), the head (status line and headers) and the body.
pub fn split_response(text: &str) -> (u16, &str, &str) {
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_status_head_and_body() {
        let (code, head, body) =
            split_response("HTTP/1.0 503 Service Unavailable\r\nx: y\r\n\r\ndraining\n");
        assert_eq!(
            (code, head, body),
            (
                503,
                "HTTP/1.0 503 Service Unavailable\r\nx: y",
                "draining\n"
            )
        );
        assert_eq!(split_response("garbage"), (0, "garbage", ""));
        assert_eq!(split_response(""), (0, "", ""));
    }
}
