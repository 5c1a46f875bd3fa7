//! Every example in `manifests/examples/` is applied for real and becomes Ready with the tier
//! and profile it names (tiers shrunk by e2e/values-e2e.yaml so they fit one small node).

use starling_e2e::Env;
use starling_operator::crd::BrokerCluster;

#[tokio::test]
async fn every_example_becomes_ready() {
    let env = Env::new().await.expect("e2e environment");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "examples: {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read example");
        let bc: BrokerCluster =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = bc.metadata.name.clone().expect("example has a name");
        let ns = env.namespace("example").await.expect("namespace");
        ns.create_cluster(&name, bc.spec.clone())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ready = ns
            .wait_ready(&name)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let status = ready.status.expect("status");
        assert_eq!(status.profile, Some(bc.spec.profile), "{}", file.display());
        assert_eq!(status.tier, Some(bc.spec.tier), "{}", file.display());
        assert_eq!(status.ready_replicas, status.replicas, "{}", file.display());
        let pods = ns.broker_pods(&name).await.expect("pods");
        let cfg = ns.broker_config(&pods[0]).await.expect("broker /config");
        assert_eq!(
            cfg.profile,
            bc.spec.profile,
            "{}: the running broker has the example's profile",
            file.display()
        );
        ns.delete().await;
    }
}
