//! Tests of the PromQL source: URLs, selectors, query text, answers, observations, and one
//! round trip against a local server speaking the Prometheus API.

use super::query::escape_value;
use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn url(s: &str) -> Result<PrometheusUrl, UrlError> {
    s.parse()
}

#[test]
fn urls_are_http_or_https_and_refused_clearly() {
    let u = url("http://prometheus.monitoring:9090").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (u.scheme(), u.host().as_str(), u.port(), u.prefix()),
        ("http", "prometheus.monitoring", 9090, "")
    );
    let u = url("http://10.0.0.5/prom/").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((u.port(), u.prefix()), (80, "/prom"));
    assert_eq!(u.to_string(), "http://10.0.0.5:80/prom");
    let v6 = url("http://[::1]:9090").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((v6.host().as_str(), v6.port()), ("[::1]", 9090));
    let tls = url("https://thanos-querier.openshift-monitoring.svc:9091")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((tls.scheme(), tls.port()), ("https", 9091));
    assert_eq!(url("HTTPS://p/q").map(|u| u.port()), Ok(443));
    for bad in [
        "",
        "prometheus:9090",
        "ftp://p",
        "http://",
        "http://:9090",
        "http://p:0",
        "http://p:99999",
        "http://p:port",
        "http://u:pw@p:9090",
        "http://p:9090/?x=1",
        "http://p:9090/#x",
        "http://p 9090",
        "http://[::1",
    ] {
        let e = url(bad).err();
        assert!(e.is_some(), "{bad} was accepted");
    }
    let e = url("http://u:pw@p")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("--prometheus-token-file"), "{e}");
}

#[test]
fn the_selector_is_filled_escaped_and_checked() {
    assert_eq!(
        fill_selector(DEFAULT_SELECTOR, "messaging", "events"),
        Ok(r#"namespace="messaging",pod=~"events-[0-9]+""#.to_string())
    );
    assert_eq!(
        fill_selector(r#"k8s_ns="{namespace}",sts="{name}""#, "a", "b"),
        Ok(r#"k8s_ns="a",sts="b""#.to_string())
    );
    assert_eq!(escape_value(r#"a.b"c"#), r#"a\\.b\"c"#);
    assert_eq!(
        fill_selector(DEFAULT_SELECTOR, "a", "b.c"),
        Err(SelectorError::Name("b.c".into())),
        "not a DNS label"
    );
    assert_eq!(fill_selector("  ", "a", "b"), Err(SelectorError::Empty));
    assert_eq!(
        fill_selector(DEFAULT_SELECTOR, "a", "B\"x"),
        Err(SelectorError::Name("B\"x".into()))
    );
    assert!(matches!(
        check_selector(r#"pod="x"}) or vector(1"#),
        Err(SelectorError::Syntax(_))
    ));
    assert!(matches!(
        check_selector(r#"pod="x"#),
        Err(SelectorError::Syntax(_))
    ));
    assert!(
        check_selector(r#"pod=~"{name}-[0-9]{1,3}""#).is_ok(),
        "braces inside quotes"
    );
}

#[test]
fn query_text_range_and_request_path() {
    assert_eq!(
        query_text(
            PUBLISHED_MESSAGES,
            r#"namespace="n""#,
            Duration::from_secs(60)
        ),
        r#"sum by (pod) (rate(starling_published_messages_total{namespace="n"}[60s]))"#
    );
    let m = Duration::from_secs(60);
    assert_eq!(range(Duration::from_secs(15), m), m);
    assert_eq!(range(Duration::from_secs(90), m), Duration::from_secs(90));
    assert_eq!(
        range(Duration::from_millis(1500), Duration::ZERO),
        Duration::from_secs(2)
    );
    let t = Timestamp::from_millisecond(1_700_000_000_123).unwrap_or(Timestamp::UNIX_EPOCH);
    let q = url("http://p:9090/prom/")
        .map(|u| u.query_url("sum by (pod) (x{a=\"b\"})", t))
        .unwrap_or_default();
    assert!(q.starts_with("http://p:9090/prom/api/v1/query?"), "{q}");
    assert_eq!(
        decoded_query(&q),
        vec![
            ("query".to_string(), "sum by (pod) (x{a=\"b\"})".to_string()),
            ("time".to_string(), "1700000000.123".to_string())
        ]
    );
    assert_eq!(parse_rate_window("1m"), Ok(Duration::from_secs(60)));
    assert!(parse_rate_window("0s").is_err());
    assert!(parse_rate_window("1 minute").is_err());
}

#[test]
fn answers_parse_into_values_per_pod() {
    let ok = r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"pod":"events-0"},"value":[1700000000.123,"12.5"]},
        {"metric":{"pod":"events-1"},"value":[1700000000.123,"0"]}]}}"#;
    assert_eq!(
        parse_response(ok),
        Ok(BTreeMap::from([
            ("events-0".to_string(), 12.5),
            ("events-1".to_string(), 0.0)
        ]))
    );
    let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    assert_eq!(parse_response(empty), Ok(BTreeMap::new()));
    let failed = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#;
    assert_eq!(
        parse_response(failed),
        Err(ResponseError::Failed {
            error_type: "bad_data".into(),
            error: "parse error at char 5".into()
        })
    );
    let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
    assert_eq!(
        parse_response(matrix),
        Err(ResponseError::ResultType("matrix".into()))
    );
    let value = |v: &str| {
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"pod":"p"}},"value":[1,{v}]}}]}}}}"#
        )
    };
    for bad in [r#""NaN""#, r#""+Inf""#, r#""-1""#, r#""fast""#, "12"] {
        assert!(
            matches!(
                parse_response(&value(bad)),
                Err(ResponseError::BadValue { .. })
            ),
            "{bad}"
        );
    }
    let nopod = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#;
    assert!(matches!(
        parse_response(nopod),
        Err(ResponseError::NoPod(_))
    ));
    assert!(matches!(
        parse_response("<html>"),
        Err(ResponseError::NotApi(_))
    ));
    assert!(matches!(
        parse_response("{}"),
        Err(ResponseError::NotApi(_))
    ));
}

#[test]
fn http_answers_api_errors_win_over_the_status_code() {
    let bad = br#"{"status":"error","errorType":"bad_data","error":"nope"}"#;
    assert!(matches!(
        parse_answer(400, bad),
        Err(QueryError::Response(ResponseError::Failed { .. }))
    ));
    assert!(matches!(
        parse_answer(502, b"<html>"),
        Err(QueryError::Status(502))
    ));
    assert!(matches!(
        parse_answer(200, b"<html>"),
        Err(QueryError::Response(ResponseError::NotApi(_)))
    ));
}

/// The name/value pairs of a URL's query, decoded.
fn decoded_query(url: &str) -> Vec<(String, String)> {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    ::url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn pods(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn answer(values: &[(&str, f64)]) -> Result<BTreeMap<String, f64>, String> {
    Ok(values.iter().map(|(p, v)| (p.to_string(), *v)).collect())
}

#[test]
fn every_pod_in_every_answer_is_a_complete_observation() {
    let two = [("b-0", 1.0), ("b-1", 2.0), ("gone-0", 100.0)];
    let o = assemble(
        at(0),
        at(15),
        &pods(&["b-0", "b-1"]),
        2,
        &[
            answer(&[("b-0", 100.0), ("b-1", 50.0)]),
            answer(&[("b-0", 200.0), ("b-1", 100.0)]),
            answer(&two),
            answer(&two),
            answer(&[("b-0", 0.5), ("b-1", 0.25)]),
        ],
    );
    assert!(o.complete(), "{:?}", o.missing);
    assert_eq!((o.from, o.to), (at(0), at(15)));
    assert_eq!(o.load(), 150.0);
    assert_eq!(o.total.delivered, 300.0);
    assert_eq!(o.total.published_bytes, 3.0, "pods not listed are ignored");
    assert_eq!(o.pod_cpu.get("b-1"), Some(&0.25));
    assert_eq!(o.total.cpu_cores, 0.75);
    assert!(o.missing.is_empty());
}

#[test]
fn an_absent_pod_or_a_failed_query_is_incomplete_and_named() {
    let full = answer(&[("b-0", 1.0), ("b-1", 1.0)]);
    let o = assemble(
        at(0),
        at(15),
        &pods(&["b-0", "b-1"]),
        2,
        &[
            full.clone(),
            full.clone(),
            full.clone(),
            full.clone(),
            answer(&[("b-0", 0.1)]),
        ],
    );
    assert!(!o.complete());
    assert_eq!((o.pods_rated, o.pods_expected), (1, 2));
    assert_eq!(
        o.missing,
        vec![
            "no series in Prometheus for pod b-1 (starling_process_cpu_seconds_total)".to_string()
        ]
    );
    assert_eq!(o.load(), 1.0, "only the rated pod counts");

    let down: Result<BTreeMap<String, f64>, String> = Err("connection refused".into());
    let o = assemble(
        at(0),
        at(15),
        &pods(&["b-0"]),
        1,
        &[down.clone(), down.clone(), down.clone(), down.clone(), down],
    );
    assert!(!o.complete());
    assert_eq!(o.pods_rated, 0);
    assert_eq!(o.missing.len(), 5, "one reason per failed query");
    assert_eq!(
        o.missing[0],
        "prometheus: starling_published_messages_total: connection refused"
    );

    let o = assemble(
        at(0),
        at(15),
        &pods(&["b-0"]),
        3,
        &[full.clone(), full.clone(), full.clone(), full.clone(), full],
    );
    assert!(!o.complete());
    assert_eq!(
        o.missing,
        vec!["1 of 3 expected broker pods exist".to_string()]
    );
}

#[tokio::test]
async fn the_first_round_is_a_baseline_and_queries_nothing() {
    // Nothing listens on this URL: a query would fail and be reported.
    let src = PromQlSource::new(
        url("http://127.0.0.1:1").unwrap_or_else(|e| panic!("{e}")),
        DEFAULT_SELECTOR,
        Duration::from_secs(60),
        Access::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let o = src
        .observe(
            "ns",
            "b",
            &pods(&["b-0"]),
            1,
            Duration::from_secs(15),
            None,
            at(0),
        )
        .await;
    assert!(!o.complete());
    assert_eq!((o.from, o.to), (at(0), at(0)));
    assert_eq!(
        o.missing,
        vec!["b-0: first Prometheus round (baseline)".to_string()]
    );
    assert!(!baseline(at(0), &[], 0).complete());
}

/// A local server answering like Prometheus's `/api/v1/query`: it records each request
/// line and answers from the counter named in the query.
#[tokio::test]
async fn observes_through_a_prometheus_api_server() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let server = tokio::spawn(async move {
        for _ in 0..5 {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).into_owned();
                let line = req.clone();
                let body = if line.contains("cpu_seconds") {
                    // b-1 has no CPU series.
                    r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"events-0"},"value":[1700000015,"0.5"]}]}}"#
                } else {
                    r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"events-0"},"value":[1700000015,"40"]},{"metric":{"pod":"events-1"},"value":[1700000015,"2"]}]}}"#
                };
                let resp = format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
                let _ = tx.send(line);
            });
        }
    });
    let token = std::env::temp_dir().join(format!("starling-promql-token-{}", std::process::id()));
    std::fs::write(&token, "t0ken\n")?;
    let src = PromQlSource::new(
        format!("http://{addr}/").parse()?,
        DEFAULT_SELECTOR,
        Duration::from_secs(60),
        Access {
            ca_file: None,
            bearer_token_file: Some(token.clone()),
        },
    )?;
    let o = src
        .observe(
            "messaging",
            "events",
            &pods(&["events-0", "events-1"]),
            2,
            Duration::from_secs(15),
            Some(at(0)),
            at(15),
        )
        .await;
    server.await?;
    let mut lines = Vec::new();
    while let Ok(l) = rx.try_recv() {
        lines.push(l);
    }
    lines.sort();
    assert_eq!(lines.len(), 5, "{lines:?}");
    let mut queried = Vec::new();
    for head in &lines {
        let line = head.lines().next().unwrap_or_default();
        let target = line
            .strip_prefix("GET ")
            .and_then(|l| l.strip_suffix(" HTTP/1.1"))
            .unwrap_or_default();
        assert!(target.starts_with("/api/v1/query?"), "{line}");
        let pairs = decoded_query(target);
        assert_eq!(pairs.len(), 2, "{pairs:?}");
        assert_eq!(pairs[1], ("time".to_string(), "1700000015.000".to_string()));
        assert_eq!(pairs[0].0, "query");
        queried.push(pairs[0].1.clone());
        assert!(
            head.to_ascii_lowercase()
                .contains("\r\nauthorization: bearer t0ken\r\n"),
            "{head}"
        );
    }
    queried.sort();
    let mut wanted: Vec<String> = COUNTERS
        .iter()
        .map(|c| {
            format!(
                r#"sum by (pod) (rate({c}{{namespace="messaging",pod=~"events-[0-9]+"}}[60s]))"#
            )
        })
        .collect();
    wanted.sort();
    assert_eq!(queried, wanted);
    assert_eq!((o.from, o.to), (at(0), at(15)));
    assert_eq!((o.pods_rated, o.pods_expected), (1, 2));
    assert_eq!(o.load(), 40.0);
    assert_eq!(o.pod_cpu.get("events-0"), Some(&0.5));
    assert_eq!(
        o.missing,
        vec![
            "no series in Prometheus for pod events-1 (starling_process_cpu_seconds_total)"
                .to_string()
        ]
    );

    // Nothing listens any more: every query fails, and says so.
    let o = src
        .observe(
            "messaging",
            "events",
            &pods(&["events-0"]),
            1,
            Duration::from_secs(15),
            Some(at(15)),
            at(30),
        )
        .await;
    assert!(!o.complete());
    assert!(
        o.missing
            .iter()
            .all(|m| m.starts_with("prometheus: starling_")),
        "{:?}",
        o.missing
    );
    Ok(())
}
